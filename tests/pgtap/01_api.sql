-- pgTAP: the SQL contract of DESIGN.md exists with the right shapes, errors
-- carry SQLSTATEs a client can act on, and settings behave.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gbml;
BEGIN;
SELECT plan(35);

SELECT has_schema('gbml');
SELECT has_table('gbml', 'models', 'the registry table exists');
SELECT columns_are('gbml', 'models', ARRAY['id', 'name', 'version', 'algorithm', 'params', 'metrics', 'rows',
                                          'features', 'device', 'timings', 'created_at', 'deployed', 'model']);
SELECT has_function('gbml', 'boost_fit', ARRAY['real[]', 'real', 'bigint', 'jsonb']);
SELECT has_function('gbml', 'kmeans_fit', ARRAY['real[]', 'integer', 'jsonb']);
SELECT has_function('gbml', 'saga_fit', ARRAY['real[]', 'real', 'jsonb']);
SELECT has_function('gbml', 'train', ARRAY['text', 'text', 'text', 'jsonb']);
SELECT has_function('gbml', 'deploy', ARRAY['text', 'integer']);
SELECT has_function('gbml', 'predict', ARRAY['bytea', 'real[]']);
SELECT has_function('gbml', 'predict', ARRAY['text', 'real[]']);
SELECT has_function('gbml', 'predict', ARRAY['text', 'record']);
SELECT has_function('gbml', 'predict', ARRAY['bytea', 'record']);
SELECT has_function('gbml', 'boost_fit', ARRAY['record', 'jsonb']);
SELECT function_returns('gbml', 'predict', ARRAY['text', 'record'], 'double precision');
SELECT has_function('gbml', 'predict_proba', ARRAY['bytea', 'real[]']);
SELECT has_function('gbml', 'kmeans_assign', ARRAY['bytea', 'real[]']);
SELECT has_function('gbml', 'kmeans_distance', ARRAY['bytea', 'real[]']);
SELECT has_function('gbml', 'model_info', ARRAY['bytea']);
SELECT has_function('gbml', 'model_json', ARRAY['bytea']);
SELECT has_function('gbml', 'feature_importance', ARRAY['bytea']);
SELECT has_function('gbml', 'devices', ARRAY[]::text[]);
SELECT function_returns('gbml', 'predict', ARRAY['bytea', 'real[]'], 'double precision');
SELECT function_returns('gbml', 'kmeans_assign', ARRAY['bytea', 'real[]'], 'integer');
SELECT is_aggregate('gbml', 'boost_fit', ARRAY['real[]', 'real', 'bigint', 'jsonb']);
SELECT volatility_is('gbml', 'predict', ARRAY['bytea', 'real[]'], 'immutable');

-- errors and their SQLSTATEs
SELECT throws_ok($$SELECT gbml.mean_fit(ARRAY[1, 'NaN']::real[], 1)$$, '22023', NULL, 'NaN features: invalid_parameter_value');
SELECT throws_ok($$SELECT gbml.mean_fit(ARRAY[1, NULL]::real[], 1)$$, '22004', NULL, 'NULL feature: null_value_not_allowed');
SELECT throws_ok($$SELECT gbml.mean_fit(ARRAY[1]::real[], 1) WHERE false$$, '02000', NULL, 'empty input: no_data');
SELECT throws_ok($$SELECT gbml.predict('\x00'::bytea, ARRAY[1]::real[])$$, 'XX001', NULL, 'corrupt model: data_corrupted');
SELECT throws_ok($$SELECT gbml.mean_fit(ARRAY[1]::real[], 1, '{"nope": 1}')$$, '22023',
                 'gbml.mean_fit: mean: unknown parameter "nope"; accepted: device, threads, gpu_id, memory_limit_mb, gpu_memory_limit_mb, eval_fraction, deploy, eval_source, features_column, label_column, group_column, weight_column, feature_columns, exclude_columns, categorical_columns, passes');
SELECT throws_ok($$SET gbml.threads = 0$$, '22023', NULL, 'threads must be >= 1');
SELECT throws_ok($$SET gbml.device = 'tpu'$$, '22023', NULL, 'device is an enum');

-- gpu: auto falls back, gpu is an error when no GPU is usable (CPU-only machines)
SET LOCAL gbml.device = 'auto';
SELECT lives_ok($$SELECT gbml.mean_fit(ARRAY[1]::real[], 1)$$, 'device auto falls back to the CPU');
SET LOCAL gbml.device = 'gpu';
SELECT CASE WHEN (SELECT count(*) FROM gbml.devices()) = 0
            THEN throws_ok($$SELECT gbml.mean_fit(ARRAY[1]::real[], 1)$$, '0A000', NULL, 'device gpu without a GPU is an error')
            ELSE lives_ok($$SELECT gbml.mean_fit(ARRAY[1]::real[], 1)$$, 'device gpu trains on the GPU') END;
RESET gbml.device;
SELECT is(gbml.model_info(gbml.mean_fit(ARRAY[1]::real[], 1)) -> 'params' ->> 'passes', '1', 'defaults are recorded in the model');

SELECT * FROM finish();
ROLLBACK;
