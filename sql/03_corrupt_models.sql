-- Any bytea that claims to be a model is validated before use: thousands of
-- truncated, bit-flipped and foreign variants of a real model all give an
-- ERROR (never a crash, never a silently wrong answer), and the server
-- stays up.
CREATE TABLE good AS
SELECT gbml.mean_fit(ARRAY[i, i % 3]::real[], (i % 5)::real) AS model FROM generate_series(1, 100) AS i;

CREATE FUNCTION try_model(m bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gbml.predict(m, ARRAY[1, 2]::real[]);
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN 'rejected';
END $$;

CREATE TABLE variants AS
WITH g AS (SELECT model, length(model) AS n FROM good)
-- truncations at every length
SELECT 'truncated' AS kind, substr(model, 1, k) AS m FROM g, generate_series(0, n - 1) AS k
UNION ALL
-- every single bit flipped, bit by bit (8 per byte)
SELECT 'bit flip', set_bit(model, b, 1 - get_bit(model, b)) FROM g, generate_series(0, 8 * n - 1) AS b
UNION ALL
-- a valid header in front of random bytes
SELECT 'foreign payload', substr(model, 1, 24) || decode(repeat(md5(s::text), (n - 24) / 32 + 1), 'hex')
  FROM g, generate_series(1, 500) AS s
UNION ALL
SELECT 'not a model', decode(md5(s::text), 'hex') FROM generate_series(1, 200) AS s;

SELECT kind, count(*) AS variants, count(*) FILTER (WHERE try_model(m) = 'accepted') AS accepted
  FROM variants GROUP BY kind ORDER BY kind;

-- the messages name the problem
SELECT gbml.predict(substr(model, 1, 10), ARRAY[1, 2]::real[]) FROM good;
SELECT gbml.predict(set_bit(model, 400, 1 - get_bit(model, 400)), ARRAY[1, 2]::real[]) FROM good;
SELECT gbml.predict('\x00'::bytea, ARRAY[1, 2]::real[]);
SELECT gbml.model_info(substr(model, 1, length(model) - 1)) FROM good;
SELECT gbml.model_json(overlay(model placing '\x02'::bytea from 5)) FROM good;
-- the untouched model still works and the server is up
SELECT gbml.predict(model, ARRAY[1, 2]::real[]) AS prediction FROM good;
SELECT 1 AS still_up;
