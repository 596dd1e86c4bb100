-- A state database as Kairox wrote it with memory schema version 1 (before memory history):
-- the v1 DDL verbatim, and rows of every kind that version stored. Loaded by the upgrade tests.
PRAGMA user_version = 1;
CREATE TABLE kairox_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
INSERT INTO kairox_schema(component, version) VALUES ('memory', 1);
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
    workspace_id TEXT,
    session_id TEXT,
    key TEXT,
    body TEXT NOT NULL CHECK (length(trim(body)) > 0),
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    provenance TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    approved_at TEXT,
    CHECK (scope = 'session' OR key IS NOT NULL),
    CHECK (scope <> 'workspace' OR workspace_id IS NOT NULL),
    CHECK (scope <> 'session' OR session_id IS NOT NULL),
    CHECK (scope <> 'user' OR (workspace_id IS NULL AND session_id IS NULL))
);
CREATE UNIQUE INDEX memories_user_key ON memories(status, key)
    WHERE scope = 'user' AND status <> 'rejected';
CREATE UNIQUE INDEX memories_workspace_key
    ON memories(status, workspace_id, key)
    WHERE scope = 'workspace' AND status <> 'rejected';
CREATE UNIQUE INDEX memories_session_key ON memories(status, session_id, key)
    WHERE scope = 'session' AND key IS NOT NULL AND status <> 'rejected';
CREATE INDEX memories_by_workspace ON memories(workspace_id, scope);
CREATE INDEX memories_by_session ON memories(session_id, scope);
INSERT INTO memories VALUES (1, 'user', NULL, NULL, 'editor.font', 'JetBrains Mono 14px.',
    'approved', '{"written_by": "user", "actor": "cli"}',
    '2026-01-01T10:00:00.000000+00:00', '2026-02-01T10:00:00.000000+00:00',
    '2026-02-01T10:00:00.000000+00:00');
INSERT INTO memories VALUES (2, 'workspace', '/ws', NULL, 'test.command', 'make test',
    'approved', '{}', '2026-01-02T10:00:00.000000+00:00', '2026-01-02T10:00:00.000000+00:00',
    '2026-01-02T10:00:00.000000+00:00');
INSERT INTO memories VALUES (3, 'user', NULL, NULL, 'editor.font', 'Fira Code 13px.',
    'pending', '{"session_id": "chat-1", "injection_warning": false}',
    '2026-02-02T10:00:00.000000+00:00', '2026-02-02T10:00:00.000000+00:00', NULL);
INSERT INTO memories VALUES (4, 'user', NULL, NULL, 'tone', 'Be chatty.', 'rejected', '{}',
    '2026-02-03T10:00:00.000000+00:00', '2026-02-03T10:00:00.000000+00:00', NULL);
INSERT INTO memories VALUES (5, 'session', '/ws', 'chat-1', NULL, 'Explain first.',
    'approved', '{}', '2026-02-04T10:00:00.000000+00:00', '2026-02-04T10:00:00.000000+00:00', NULL);
-- Memory 6 was forgotten: its id must not be handed out again.
INSERT INTO sqlite_sequence(name, seq) VALUES ('memories', 6);
