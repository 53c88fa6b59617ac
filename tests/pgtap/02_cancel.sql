-- pgTAP: a real query cancel (pg_cancel_backend from another session, through
-- dblink) stops a long training within a second.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gbml;
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT plan(4);

SELECT dblink_connect('trainer', format('dbname=%s port=%s host=%s user=%s', current_database(),
                       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1),
                       current_user));
SELECT is(dblink_send_query('trainer',
          $$SELECT gbml.mean_fit(ARRAY[i, i % 7]::real[], (i % 3)::real, '{"passes": 100000000}')
              FROM generate_series(1, 100000) AS i$$), 1, 'long training started');
SELECT pg_sleep(1.0);
SELECT ok(dblink_is_busy('trainer') = 1, 'still training after a second');

CREATE TEMP TABLE cancel_timing AS SELECT clock_timestamp() AS asked;
SELECT dblink_cancel_query('trainer');
-- dblink_get_result waits for the query to end; it ends with the cancel error
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.wait_result() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM * FROM dblink_get_result('trainer', false) AS t(m bytea);
    RETURN dblink_error_message('trainer');
END $$;
SELECT alike(pg_temp.wait_result(), '%cancel%', 'the training ended with the cancel error');
SELECT cmp_ok(extract(epoch FROM clock_timestamp() - asked)::numeric, '<', 1.0,
              'cancel honoured within a second') FROM cancel_timing;
SELECT dblink_disconnect('trainer');
SELECT * FROM finish();
