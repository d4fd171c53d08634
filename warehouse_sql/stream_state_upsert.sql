-- Set one stream's bookmark (parameters: stream, bookmark JSON).
INSERT OR REPLACE INTO stream_state VALUES (?, ?, now());
