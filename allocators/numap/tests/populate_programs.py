#!/usr/bin/python3
"""Peak RSS and wall time of real programs under numap's NUMAP_POPULATE=auto, =none, and another
numap library at auto (docs/benchmarks.md, "Blocks written in part", real programs). A measuring
tool, not a test:
    /usr/bin/python3 allocators/numap/tests/populate_programs.py REPS build/lib/libnumap.so OTHER.so
Needs sqlite3, xz, zstd, perl and g++ (ci/setup.sh --tests installs them); run from the repo root."""
import os, statistics as st, subprocess, sys, tempfile, time

def programs(work):
    tar = os.path.join(work, "repo.tar")
    subprocess.run(["git", "archive", "--format=tar", "-o", tar, "HEAD"], check=True)
    sql = os.path.join(work, "gen.sql")
    with open(sql, "w") as f:
        f.write("CREATE TABLE t(a INTEGER, b TEXT, c REAL);\n"
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000) "
                "INSERT INTO t SELECT i, hex(randomblob(16)), i*0.5 FROM n;\n"
                "CREATE INDEX ib ON t(b);\nSELECT count(*), sum(c) FROM t WHERE b > '8';\n")
    db = os.path.join(work, "db")
    return {
        "sqlite3": ["sh", "-c", f"rm -f {db}; sqlite3 {db} < {sql}"],
        "xz -T2": ["xz", "-T2", "-6", "-c", tar],
        "zstd -T2": ["zstd", "-T2", "-19", "-c", tar],
        "perl": ["perl", "-e", 'my %h; for my $i (1..300000) { $h{"k$i"} = "v" x ($i % 200) } '
                 'my $s = 0; $s += length($h{$_}) for keys %h; print $s'],
        "python3": ["/usr/bin/python3", "-c", "d = {str(i): [i] * (i % 50) for i in range(300000)}; "
                    "print(sum(len(v) for v in d.values()))"],
        "g++ -S": ["g++", "-std=c++20", "-O2", "-S", "-o", "/dev/null", "-I.", "allocators/numap/heap.cpp"],
    }

def run(cmd, lib, populate):
    """(peak RSS MiB, wall s) of one run: ru_maxrss of the process and what it waited for."""
    env = dict(os.environ, NUMAP_POPULATE=populate, LD_PRELOAD=lib)
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1), os.dup2(null, 2)
        os.execvpe(cmd[0], cmd, env)
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"{cmd[0]} failed under {lib} (NUMAP_POPULATE={populate})")
    return usage.ru_maxrss / 1024, time.monotonic() - t

def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    reps, lib, other = int(sys.argv[1]), os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    setups = (("auto", lib, "auto"), ("none", lib, "none"), ("other", other, "auto"))
    print("| program | auto MiB | none MiB | other MiB | auto/none | auto s | none s | other s |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as work:
        for name, cmd in programs(work).items():
            runs = {tag: [] for tag, _, _ in setups}
            for _ in range(reps):  # interleaved, so that the machine's drift falls on every setup alike
                for tag, library, populate in setups:
                    runs[tag].append(run(cmd, library, populate))
            m = {t: (st.median(r[0] for r in v), st.median(r[1] for r in v)) for t, v in runs.items()}
            print(f"| {name} | {m['auto'][0]:.1f} | {m['none'][0]:.1f} | {m['other'][0]:.1f} | "
                  f"{m['auto'][0] / m['none'][0]:.2f} | {m['auto'][1]:.2f} | {m['none'][1]:.2f} | {m['other'][1]:.2f} |",
                  flush=True)

if __name__ == "__main__":
    main()
