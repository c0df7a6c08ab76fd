CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, payload TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t SELECT x, printf('name%08d', (x * 7919) % 300000), x % 97, hex(x * 2654435761) FROM c;
CREATE INDEX t_name ON t(name);
CREATE INDEX t_grp ON t(grp, payload);
SELECT count(*) FROM t;
