-- The extension loads, with its schema, registry and settings.
SELECT extname, extversion, n.nspname
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE extname = 'gbml';
SHOW gbml.device;
SHOW gbml.threads;
SHOW gbml.memory_limit;
SELECT count(*) AS gpus FROM gbml.devices();

-- For the memory tests (16_spill, 13_gpu_emulated): a training, fit with %s
-- for its memory_limit_mb, at budgets from 1 MB up until one trains; whether
-- every smaller budget's ERROR named the step that did not fit, or some gave
-- the plain "memory limit exceeded: X MB needed" of an allocation no check
-- counted (and at which budgets).
CREATE FUNCTION budgets_named(fit text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    mb float8;
    msg text;
    plain text := '';
BEGIN
    SET LOCAL client_min_messages = warning;
    FOREACH mb IN ARRAY ARRAY[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64] LOOP
        BEGIN
            EXECUTE format(fit, mb);
            RETURN CASE WHEN plain = '' THEN 'named, then trained' ELSE 'plain at' || plain END;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            IF msg ~ 'memory limit exceeded: [0-9.]+ [kM]B needed' THEN
                plain := plain || ' ' || mb || ' MB';
            ELSIF msg !~ 'memory limit exceeded by what stays in memory' THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    RETURN 'no model up to 64 MB' || CASE WHEN plain = '' THEN '' ELSE ', plain at' || plain END;
END $$;
