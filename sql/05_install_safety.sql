-- The install script is search_path-safe and defines no SECURITY DEFINER
-- function; gbml.models is writable only by its owner unless granted.
DROP EXTENSION gbml CASCADE;
CREATE SCHEMA evil;
-- a hostile search_path: functions and operators the install script or the
-- registry functions might pick up if they were not schema-qualified
CREATE FUNCTION evil.hashtext(text) RETURNS integer LANGUAGE sql AS 'SELECT 42';
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$;
SET search_path = evil, pg_catalog;
CREATE EXTENSION gbml;
SELECT gbml.train('safe', 'mean', 'SELECT ARRAY[1, 2]::real[] AS features, 1::real AS label') > 0 AS trained;
SELECT created_at > '2001-01-01' AS real_now FROM gbml.models WHERE name = 'safe';
RESET search_path;
DROP SCHEMA evil CASCADE;

SELECT count(*) AS security_definer_functions
  FROM pg_proc WHERE pronamespace = 'gbml'::regnamespace AND prosecdef;
-- every plpgsql function pins its search_path
SELECT p.proname, p.proconfig
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'gbml'::regnamespace AND l.lanname = 'plpgsql' ORDER BY 1;
-- aggregates and scorers are parallel safe
SELECT p.proname, p.proparallel, count(*) AS overloads
  FROM pg_proc p WHERE p.pronamespace = 'gbml'::regnamespace AND p.proname NOT LIKE '\_%'
 GROUP BY 1, 2 ORDER BY 1;

-- privileges: others may read the registry but not write it
CREATE ROLE gbml_reader;
SET ROLE gbml_reader;
SELECT count(*) >= 1 AS can_read FROM gbml.models;
SELECT gbml.predict('safe', ARRAY[1, 2]::real[]) AS can_score;
INSERT INTO gbml.models (name, version, algorithm, params, metrics, rows, features, device, timings, model)
SELECT name, 99, algorithm, params, metrics, rows, features, device, timings, model FROM gbml.models LIMIT 1;
UPDATE gbml.models SET deployed = false;
SELECT gbml.train('mine', 'mean', 'SELECT ARRAY[1, 2]::real[] AS features, 1::real AS label');
SELECT gbml.deploy('safe', 1);
RESET ROLE;
GRANT INSERT, UPDATE ON gbml.models TO gbml_reader;
GRANT USAGE ON SEQUENCE gbml.models_id_seq TO gbml_reader;
SET ROLE gbml_reader;
SELECT gbml.train('mine', 'mean', 'SELECT ARRAY[1, 2]::real[] AS features, 1::real AS label') > 0 AS granted_can_train;
RESET ROLE;
DELETE FROM gbml.models WHERE name = 'mine';
REVOKE ALL ON gbml.models FROM gbml_reader;
REVOKE ALL ON SEQUENCE gbml.models_id_seq FROM gbml_reader;
DROP ROLE gbml_reader;
