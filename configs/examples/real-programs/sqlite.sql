-- numap-real-programs.toml's sqlite3 program: 500,000 rows inserted into an in-memory database,
-- indexed on a text column of scattered values (a multiplicative hash of the row number: the same
-- output under every allocator, which allocmark checks), queried.
CREATE TABLE t(a INTEGER, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500000)
INSERT INTO t SELECT i, printf('%08x%08x', (i * 2654435761) % 4294967296, (i * 40503) % 65521), i * 0.5 FROM n;
CREATE INDEX ib ON t(b);
SELECT count(*), sum(c) FROM t WHERE b > '8';
