-- Query cancel stops training promptly and frees its memory; so does
-- statement_timeout.  The mean model's "passes" makes training long.
CREATE TABLE big AS SELECT ARRAY[i, i % 7, 1]::real[] AS f, (i % 3)::real AS l FROM generate_series(1, 200000) AS i;
SET statement_timeout = '300ms';
SELECT gbml.mean_fit(f, l, '{"passes": 1000000}') FROM big;
SELECT gbml.train('slow', 'mean', 'big', '{"passes": 1000000, "features_column": "f", "label_column": "l"}');
RESET statement_timeout;
SELECT count(*) AS versions_left FROM gbml.models WHERE name = 'slow';
-- the backend is fine afterwards
SELECT length(gbml.mean_fit(f, l)) > 0 AS trains_again FROM big;
