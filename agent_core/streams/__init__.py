"""Following a run's stream live: SSE, WebSocket, the AI SDK protocol, one feed per run per
process (SPEC §9)."""
