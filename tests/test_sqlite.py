"""The sqlite3 command-line shell on the loopback example: a database built
under ldpfuse gives the same answers as a native one, and the file left in
the lower directory is a complete, valid database."""

import sqlite3

import pytest

from conftest import LDP_MODE, MEMORY, need

ROWS = 1000


def write_sql(ws):
    """create.sql: a table and ROWS inserts in one transaction."""
    lines = ["CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER, s TEXT);",
             "CREATE INDEX t_x ON t (x);", "BEGIN;"]
    lines += [f"INSERT INTO t (x, s) VALUES ({i * 7 % 1013}, 'row {i} {'z' * (i % 50)}');"
              for i in range(ROWS)]
    lines += ["COMMIT;"]
    path = ws.tmp / "create.sql"
    path.write_text("\n".join(lines) + "\n")
    return path


QUERIES = """
    sqlite3 "$D/t.db" 'PRAGMA integrity_check;'
    sqlite3 "$D/t.db" 'SELECT count(*), sum(x), max(length(s)) FROM t;'
    sqlite3 "$D/t.db" 'SELECT id, x, s FROM t WHERE x BETWEEN 100 AND 110 ORDER BY id;'
    sqlite3 "$D/t.db" 'UPDATE t SET x = x + 1 WHERE id % 3 = 0; DELETE FROM t WHERE id % 10 = 0;'
    sqlite3 "$D/t.db" 'SELECT count(*), sum(x) FROM t; PRAGMA integrity_check;'
    sqlite3 "$D/t.db" .dump | sha256sum
"""


def db_summary(path):
    """Open a database file natively (no ldpfuse) and summarise it."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (con.execute("PRAGMA integrity_check").fetchall(),
                con.execute("SELECT count(*), sum(x), group_concat(id) FROM t").fetchall())
    finally:
        con.close()


@pytest.fixture(params=[{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def sql(request, ws):
    """The workspace with create.sql written, and the loopback options."""
    need("sqlite3")
    ws.sql = write_sql(ws)
    ws.options = request.param
    return ws


def test_sqlite_rollback_journal_results_match_native(sql):
    sql.compare_sh("""
        sqlite3 "$D/t.db" < "$SQL"
    """ + QUERIES + """
        ls "$D"
    """, env_extra={"SQL": sql.sql}, options=sql.options)
    assert db_summary(sql.lower / "t.db") == db_summary(sql.native / "t.db")


def test_sqlite_wal_mode_results_match_native(sql):
    sql.compare_sh("""
        sqlite3 "$D/t.db" 'PRAGMA journal_mode=WAL;'
        sqlite3 "$D/t.db" < "$SQL"
    """ + QUERIES + """
        sqlite3 "$D/t.db" 'PRAGMA journal_mode;'
        ls "$D"
    """, env_extra={"SQL": sql.sql}, options=sql.options)
    assert db_summary(sql.lower / "t.db") == db_summary(sql.native / "t.db")


def test_sqlite_wal_readonly_open_checkpoint_and_vacuum_match_native(sql):
    # The WAL index is an mmap'd -shm file beside the database; a read-only
    # open, a truncating checkpoint and a VACUUM (rewrites the whole file)
    # each take a different path through it.
    sql.compare_sh("""
        sqlite3 "$D/t.db" 'PRAGMA journal_mode=WAL;' < /dev/null
        sqlite3 "$D/t.db" < "$SQL"
        sqlite3 "$D/t.db" <<EOF
.open --readonly $D/t.db
SELECT count(*) FROM t;
EOF
        sqlite3 -cmd 'PRAGMA wal_checkpoint(TRUNCATE);' "$D/t.db" 'SELECT count(*) FROM t;'
        sqlite3 "$D/t.db" 'VACUUM; PRAGMA integrity_check;'
    """, env_extra={"SQL": sql.sql}, options=sql.options)
    assert db_summary(sql.lower / "t.db") == db_summary(sql.native / "t.db")


def test_sqlite_database_in_lower_dir_is_complete_after_exit(sql):
    """Nothing is lost when the last process ends: the lower file alone holds
    every committed row."""
    r = sql.ldp_run(["sh", "-c", 'sqlite3 "$D/t.db" < "$SQL"'],
                    env_extra={"SQL": sql.sql}, options=sql.options)
    assert r.returncode == 0, r.describe()
    assert not (sql.lower / "t.db-journal").exists()
    sqlite3.connect(sql.native / "t.db").executescript(sql.sql.read_text())
    assert db_summary(sql.lower / "t.db") == db_summary(sql.native / "t.db")


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_sqlite_single_process_on_memory_example_matches_native(ws, journal):
    """One sqlite3 process does everything, so it runs on the in-memory
    example too: build, query, close and reopen the file (.open), check."""
    need("sqlite3")
    create = write_sql(ws).read_text()
    session = ws.write_script("session.sql", f"""
PRAGMA journal_mode={journal};
{create}
PRAGMA integrity_check;
SELECT count(*), sum(x), max(length(s)) FROM t;
UPDATE t SET x = x + 1 WHERE id % 3 = 0;
DELETE FROM t WHERE id % 10 = 0;
.open $D/t.db
PRAGMA journal_mode;
SELECT count(*), sum(x) FROM t;
SELECT id, x FROM t WHERE x BETWEEN 100 AND 103 ORDER BY id;
VACUUM;
PRAGMA integrity_check;
""")
    ws.compare_sh("""
        sed "s|\\$D|$D|" "$SESSION" | sqlite3 "$D/t.db"
    """, fs=MEMORY, env_extra={"SESSION": session})


CONCURRENT = """
    sqlite3 "$D/c.db" 'CREATE TABLE t (w TEXT, i INTEGER);'
    for w in a b c; do
        for i in $(seq 1 60); do echo "INSERT INTO t (w, i) VALUES ('$w', $i);"; done \\
            | sqlite3 -cmd '.timeout 30000' "$D/c.db" &
    done
    wait
    sqlite3 "$D/c.db" 'SELECT w, count(*), sum(i) FROM t GROUP BY w ORDER BY w; PRAGMA integrity_check;'
"""


@pytest.mark.parametrize("options", [{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_sqlite_concurrent_writers_lose_nothing(ws, journal, options, request):
    """Three sqlite3 processes insert at once, each row its own transaction:
    the locks (fcntl on the database file) must serialise them."""
    need("sqlite3")
    if options and LDP_MODE != "shared":
        # --mode shared: one page cache per file for every process (docs/cache.md), and
        # caches that hear of other processes' changes (the journal's coming and going)
        request.applymarker(pytest.mark.xfail(strict=False, reason=(
            "with passthrough=no in the embedded mode each process has its own cache of the "
            "file, and its byte-range locks are its own: concurrent sqlite3 writers get "
            "'disk I/O error (10)'")))
    ws.compare_sh(f"""
        sqlite3 "$D/c.db" 'PRAGMA journal_mode={journal};' > /dev/null
    """ + CONCURRENT, options=options,
                  check_tree=False)  # row order, so the bytes, vary run to run
