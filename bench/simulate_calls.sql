-- 1M recorded action calls for `manage.py approvals simulate` (bench/README.md, "Policy
-- simulation"): 1,000 threads, runs and messages, then 1,000,000 calls of four demo tools with
-- 20,000 distinct argument sets, stamped as the demo policy stamps them, over the last 20 days.
INSERT INTO agent_core_thread (id, owner_ref, agent, title, created_at, updated_at)
SELECT 'thr_b' || i, 'user:' || (i % 50), 'support', '', now(), now()
FROM generate_series(1, 1000) i;
INSERT INTO agent_core_run (id, agent, status, error_code, error_message, actor_ref, actor_roles,
  runner, lease_owner, lease_token, cancel_requested, last_seq, created_at, updated_at, thread_id)
SELECT 'run_b' || i, 'support', 'completed', '', '', 'user:' || (i % 50), '[]', 'inline', '', 0,
  false, 0, now(), now(), 'thr_b' || i
FROM generate_series(1, 1000) i;
INSERT INTO agent_core_message (id, seq, role, content, created_at, thread_id)
SELECT 'msg_b' || i, 1, 'assistant', '[]', now(), 'thr_b' || i FROM generate_series(1, 1000) i;
INSERT INTO agent_core_toolcall (id, run_id, thread_id, message_id, step_name, position,
  provider_call_id, tool_name, kind, args, args_digest, status, requires_approval, approver,
  requester_ref, expires_at, remember, decided_by_ref, decided_via, decided_at, reason,
  confirmation, summary, error, attempts, fence, requested_at)
SELECT 'tc_b' || i, 'run_b' || (i % 1000 + 1), 'thr_b' || (i % 1000 + 1), 'msg_b' || (i % 1000 + 1),
  'llm:' || (i / 1000), i % 1000, '',
  (ARRAY['purge_cache', 'issue_refund', 'send_campaign', 'sign_off'])[i % 4 + 1], 'action',
  CASE i % 4
    WHEN 0 THEN jsonb_build_object('path', '/products/' || (i % 5000))
    WHEN 1 THEN jsonb_build_object('order_id', 'A-1001', 'amount', i % 5000)
    ELSE jsonb_build_object('campaign_id', 'c' || (i % 5000)) END,
  '', 'succeeded', true,
  (ARRAY['requester', 'finance', 'marketing', 'marketing'])[i % 4 + 1],
  'user:' || (i % 50), CASE WHEN i % 4 = 1 THEN now() + interval '1 hour' END, false,
  'user:1', 'api', now(), '', '', '', '', 1, 0,
  now() - make_interval(secs => i % 1728000)
FROM generate_series(1, 1000000) i;
ANALYZE;
