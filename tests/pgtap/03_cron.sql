-- pgTAP: pg_cron schedules a retraining with gbml.train, and the job runs.
-- pg_cron 1.4 schedules by the minute, so this test waits up to 75 s.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gbml;
CREATE EXTENSION IF NOT EXISTS pg_cron;
SELECT plan(3);

DROP TABLE IF EXISTS cron_rows;
CREATE TABLE cron_rows AS
SELECT ARRAY[i % 5, 1]::real[] AS features, (i % 2)::real AS label FROM generate_series(1, 1000) AS i;
DELETE FROM gbml.models WHERE name = 'cron_model';

SELECT cron.schedule('gbml-retrain', '* * * * *',
                     $$SELECT gbml.train('cron_model', 'mean', 'public.cron_rows')$$) AS jobid \gset
SELECT is((SELECT command FROM cron.job WHERE jobid = :jobid),
          $$SELECT gbml.train('cron_model', 'mean', 'public.cron_rows')$$, 'the retraining is scheduled');

CREATE FUNCTION pg_temp.wait_for_model(max_seconds int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. max_seconds LOOP
        IF EXISTS (SELECT 1 FROM gbml.models WHERE name = 'cron_model') THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(1);
    END LOOP;
    RETURN false;
END $$;
-- each statement sees what the job committed meanwhile (read committed)
SELECT ok(pg_temp.wait_for_model(75), 'pg_cron ran gbml.train and a model version appeared');
SELECT ok((SELECT deployed FROM gbml.models WHERE name = 'cron_model' ORDER BY version DESC LIMIT 1),
          'the scheduled version is deployed');
SELECT cron.unschedule(:jobid);
DELETE FROM gbml.models WHERE name = 'cron_model';
DROP TABLE cron_rows;
SELECT * FROM finish();
