-- pgTAP: a real query cancel (pg_cancel_backend from another session, through
-- dblink) stops a long GPU training (on the emulated CUDA backend) within a
-- second, and the trainer's backend holds nothing on the device afterwards.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gbml;
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT plan(6);

SELECT dblink_connect('gpu_trainer', format('dbname=%s port=%s host=%s user=%s', current_database(),
                       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1),
                       current_user));
SELECT is(dblink_exec('gpu_trainer', $$SET gbml.cuda_library = 'gbml_cuda_emu'$$), 'SET', 'emulated backend chosen');
SELECT is(dblink_send_query('gpu_trainer',
          $$SELECT gbml.boost_fit(ARRAY[i % 7, i % 11, (i * 13) % 17]::real[], (i % 5)::real,
                                  '{"iterations": 100000, "device": "gpu"}')
              FROM generate_series(1, 20000) AS i$$), 1, 'long GPU training started');
SELECT pg_sleep(1.0);
SELECT ok(dblink_is_busy('gpu_trainer') = 1, 'still training after a second');

CREATE TEMP TABLE cancel_timing AS SELECT clock_timestamp() AS asked;
SELECT dblink_cancel_query('gpu_trainer');
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.wait_result() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    message text;
BEGIN
    PERFORM * FROM dblink_get_result('gpu_trainer', false) AS t(m bytea);
    message := dblink_error_message('gpu_trainer');
    -- the empty result that frees the connection for the next query
    PERFORM * FROM dblink_get_result('gpu_trainer', false) AS t(m bytea);
    RETURN message;
END $$;
SELECT alike(pg_temp.wait_result(), '%cancel%', 'the GPU training ended with the cancel error');
SELECT cmp_ok(extract(epoch FROM clock_timestamp() - asked)::numeric, '<', 1.0,
              'cancel honoured within a second') FROM cancel_timing;
SELECT is((SELECT r FROM dblink('gpu_trainer', $$SELECT (gbml.gpu_resources() - 'backend')::text$$) AS t(r text)),
          '{"events": 0, "streams": 0, "contexts": 0, "device_bytes": 0, "pinned_bytes": 0, "device_allocations": 0, "pinned_allocations": 0}',
          'nothing held on the device after the cancel');
SELECT dblink_disconnect('gpu_trainer');
SELECT * FROM finish();
