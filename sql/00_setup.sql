-- The extension loads, with its schema, registry and settings.
SELECT extname, extversion, n.nspname
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE extname = 'gbml';
SHOW gbml.device;
SHOW gbml.threads;
SHOW gbml.memory_limit;
SELECT count(*) AS gpus FROM gbml.devices();
