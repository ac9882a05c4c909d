"""Demo data: a clean multi-scope store, and the polluted legacy store (docs/architecture.md
"Raw transcript stored as memory").

Every demo memory has a stable id (uuid5 of DEMO_NAMESPACE and a key), so seeding twice
creates nothing the second time and never touches memories someone has since edited.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from ingest import ingestion, jsonl, writing
from memoryui.models import Memory

DEMO_NAMESPACE = uuid.UUID("6d1f8a52-3c1e-4f0b-9a57-2f7c4b1e9d03")
ACTOR = "seed_demo"


def demo_id(key: str) -> uuid.UUID:
    return uuid.uuid5(DEMO_NAMESPACE, key)


# --- the clean store -----------------------------------------------------------------------
# (key, scope, kind, text, extra fields for the write path; "tombstone" = reason to tombstone it)

ASSISTANT = "agent:assistant"
OPS = "agent:ops-bot"
USER_42 = "user:42"
GLOBAL = "global"

CLEAN_MEMORIES: list[tuple[str, str, str, str, dict]] = [
    # agent:assistant — a personal assistant and what it knows about its user.
    ("assistant:name", ASSISTANT, "entity", "The user's name is Li Dongsheng (李东升); call him Dongsheng.",
     {"entity_key": "name:li-dongsheng", "confidence": 0.98, "source": "extractor:l0"}),
    ("assistant:phone", ASSISTANT, "entity", "用户的手机号是 186 0000 1234。",
     {"entity_key": "phone:18600001234", "confidence": 0.95, "source": "extractor:l0"}),
    ("assistant:birthday", ASSISTANT, "entity", "The user's birthday is 1988-12-12.",
     {"entity_key": "birthday:1988-12-12", "confidence": 0.95, "source": "extractor:l0"}),
    ("assistant:email", ASSISTANT, "entity", "The user's work e-mail is dongsheng@example.com.",
     {"entity_key": "email:dongsheng@example.com", "confidence": 0.9, "source": "extractor:l0"}),
    ("assistant:lucky", ASSISTANT, "entity", "用户的幸运数字是 88、66 和 99。",
     {"entity_key": "lucky_number:88-66-99", "confidence": 0.9, "source": "extractor:l0"}),
    ("assistant:co-authored-by", ASSISTANT, "preference",
     "Never add a Co-Authored-By trailer to commit messages.",
     {"confidence": 0.95, "source": "extractor:l0", "metadata": {"tags": ["git"]}}),
    ("assistant:terse", ASSISTANT, "preference", "回答尽量简短：先给结论，再给必要的细节。",
     {"confidence": 0.92, "source": "extractor:l1"}),
    ("assistant:code-style", ASSISTANT, "preference",
     "Prefers Python code samples with type hints, formatted with ruff.",
     {"confidence": 0.75, "source": "extractor:l1", "metadata": {"tags": ["code-style"]}}),
    ("assistant:feishu", ASSISTANT, "preference", "喜欢用飞书沟通，不喜欢邮件。",
     {"confidence": 0.7, "source": "extractor:l1"}),
    ("assistant:gpus", ASSISTANT, "fact",
     "The user's team runs 1000 RTX 4070 GPUs in an IDC in Hangzhou, mostly for inference.",
     {"confidence": 0.85, "source": "extractor:l1"}),
    ("assistant:timezone", ASSISTANT, "fact", "用户在杭州工作，时区是 Asia/Shanghai (UTC+8)。",
     {"confidence": 0.8, "source": "extractor:l1"}),
    ("assistant:memoryui-state", ASSISTANT, "project_state",
     "memoryui 0.1: import/export done, recall playground in progress; "
     "blocker: the relevance floor is not calibrated for the embedder yet.",
     {"confidence": 0.8, "source": "extractor:l1", "metadata": {"project": "memoryui"}}),
    ("assistant:gpu-expansion", ASSISTANT, "project_state",
     "GPU 集群扩容：第二批 200 张卡预计下月到货，机柜电力已确认，网络布线待排期。",
     {"confidence": 0.75, "source": "extractor:l1"}),
    ("assistant:weekly-meeting", ASSISTANT, "remember",
     "记住：每周五下午四点开周会，会前准备好 GPU 利用率报表。",
     {"confidence": 0.9, "source": "remember"}),
    ("assistant:staging-reset", ASSISTANT, "remember",
     "Remember that the staging database is reset every Sunday night.",
     {"confidence": 0.9, "source": "remember"}),
    ("assistant:summary-setup", ASSISTANT, "summary",
     "Session summary: set up the assistant, imported contacts from Feishu, agreed on short answers "
     "and on Feishu for notifications.",
     {"confidence": 0.7, "source": "compaction", "metadata": {"generation": 1}}),
    ("assistant:delegates-ops", ASSISTANT, "relationship",
     "agent:assistant hands infrastructure questions over to agent:ops-bot.",
     {"confidence": 0.85, "source": "manual"}),
    ("assistant:old-phone", ASSISTANT, "entity", "用户的手机号是 139 0000 0000。",
     {"entity_key": "phone:13900000000", "confidence": 0.9, "source": "extractor:l0",
      "tombstone": "superseded: the user changed numbers (now 186 0000 1234)"}),
    ("assistant:long-answers", ASSISTANT, "preference", "Prefers long, detailed answers with many examples.",
     {"confidence": 0.6, "source": "extractor:l1",
      "tombstone": "contradicted by the user: wants short answers"}),
    # agent:ops-bot — an operations agent: procedures, gotchas, escalation paths.
    ("ops:release", OPS, "procedure",
     "Release: run the test suite → check the dashboard in a browser → tag the release → deploy to staging "
     "→ smoke test → deploy to production.",
     {"confidence": 0.9, "source": "manual", "metadata": {"tags": ["release"]}}),
    ("ops:gpu-node-failure", OPS, "procedure",
     "GPU 节点故障处理：先 drain 节点 → 查看 nvidia-smi 和 dmesg → 重启 → 仍失败则提交硬件工单并通知负责人。",
     {"confidence": 0.9, "source": "manual", "metadata": {"tags": ["gpu", "runbook"]}}),
    ("ops:article-list-gotcha", OPS, "fact",
     "Gotcha: mcp__ata__article-list-query returns HTTP 500 when page > 10 — use the cursor instead "
     "(confirmed workaround).",
     {"confidence": 0.9, "source": "extractor:l1",
      "metadata": {"tags": ["gotcha"], "tools": ["mcp__ata__article-list-query"]}}),
    # A guessed call format carried over from an older store: what the active-tool filter keeps out of
    # recall while the agent is calling that tool (FILTER_EXAMPLE shows it in the playground).
    ("ops:article-list-call-format", OPS, "procedure",
     "Call format for mcp__ata__article-list-query (guessed from an early session): pass "
     '{"query": string, "page": int, "page_size": int ≤ 50}; the articles come back under data.items.',
     {"confidence": 0.6, "source": "import",
      "metadata": {"tools": ["mcp__ata__article-list-query"], "origin": "imported from the old store"}}),
    ("ops:bitable-gotcha", OPS, "fact",
     "坑：飞书多维表格 API 一次写入超过 500 行会静默截断；已确认的解决办法是分批写入，每批不超过 500 行。",
     {"confidence": 0.85, "source": "extractor:l1",
      "metadata": {"tags": ["gotcha"], "tools": ["feishu::bitable_write"]}}),
    ("ops:peers", OPS, "relationship",
     "The lead agent agent:main has peer agents a1, a2 and a3; a1 delegates to a2, a2 to a3.",
     {"confidence": 0.8, "source": "extractor:l1"}),
    ("ops:escalation", OPS, "relationship",
     "IDC 升级路径：值班工程师王磊 → 基础设施负责人陈静。",
     {"confidence": 0.85, "source": "manual"}),
    ("ops:oncall-phone", OPS, "entity", "The IDC on-call hotline is 400-800-1234.",
     {"entity_key": "phone:4008001234", "confidence": 0.95, "source": "extractor:l0"}),
    ("ops:prometheus", OPS, "fact",
     "Prometheus runs at http://prometheus.internal:9090; alerts go to the #ops-alerts channel.",
     {"confidence": 0.8, "source": "extractor:l1"}),
    ("ops:kubeconfig", OPS, "fact",
     "凭据位置：部署用的 kubeconfig 在 Vault 路径 secret/ops/kubeconfig，不要写进代码仓库。",
     {"confidence": 0.85, "source": "manual", "metadata": {"tags": ["credentials"]}}),
    ("ops:gateway-migration", OPS, "project_state",
     "Inference gateway migration to the new cluster: 60% of traffic moved, rollback plan tested.",
     {"confidence": 0.8, "source": "extractor:l1", "metadata": {"project": "gateway-migration"}}),
    ("ops:disk-alert", OPS, "project_state",
     "gpu-node-17 的磁盘告警已确认，替换用的 SSD 已下单。",
     {"confidence": 0.7, "source": "extractor:l1"}),
    ("ops:weekly-summary", OPS, "summary",
     "上周运维总结：处理了 3 次 GPU 掉卡和 1 次网关重启，没有数据丢失。",
     {"confidence": 0.75, "source": "compaction", "metadata": {"generation": 1}}),
    ("ops:no-daytime-restart", OPS, "remember",
     "Remember: never restart the gateway during business hours (09:00–18:00 CST) without approval.",
     {"confidence": 0.9, "source": "remember"}),
    ("ops:firewall-blocker", OPS, "project_state", "Gateway migration is blocked on firewall rules.",
     {"confidence": 0.7, "source": "extractor:l1", "tombstone": "resolved: the firewall rules are deployed"}),
    ("ops:article-list-wrong", OPS, "fact", "article-list-query accepts any page number up to 100.",
     {"confidence": 0.5, "source": "extractor:l1",
      "tombstone": "wrong: it returns 500 past page 10, see the cursor gotcha"}),
    # user:42 — one user's own memories, shared by every agent that works for her.
    ("user42:name", USER_42, "entity", "User 42 is 王芳 (Wang Fang), product manager of memoryui.",
     {"entity_key": "name:王芳", "confidence": 0.95, "source": "extractor:l0"}),
    ("user42:birthday", USER_42, "entity", "王芳的生日是 1992-03-08。",
     {"entity_key": "birthday:1992-03-08", "confidence": 0.9, "source": "extractor:l0"}),
    ("user42:phone", USER_42, "entity", "王芳的电话是 138 0013 8000。",
     {"entity_key": "phone:13800138000", "confidence": 0.9, "source": "extractor:l0"}),
    ("user42:report-format", USER_42, "preference", "王芳希望周报用表格，不要长段落。",
     {"confidence": 0.85, "source": "extractor:l1"}),
    ("user42:meetings", USER_42, "preference", "Prefers meetings after 10:00 Beijing time.",
     {"confidence": 0.75, "source": "extractor:l1"}),
    ("user42:roadmap-tool", USER_42, "fact", "Wang Fang keeps the roadmap in Feishu Docs.",
     {"confidence": 0.8, "source": "extractor:l1"}),
    ("user42:roadmap", USER_42, "project_state",
     "Q3 roadmap: the recall playground and the clean-up wizard are the two top items.",
     {"confidence": 0.8, "source": "extractor:l1", "metadata": {"project": "memoryui"}}),
    ("user42:approver", USER_42, "remember", "Remember that 王芳 approves every production release.",
     {"confidence": 0.9, "source": "remember"}),
    ("user42:reports-to", USER_42, "relationship", "王芳向陈静汇报，每天和 agent:assistant 协作。",
     {"confidence": 0.8, "source": "extractor:l1"}),
    ("user42:onboarding-summary", USER_42, "summary",
     "Onboarding call with Wang Fang: agreed on weekly demos on Thursdays and a shared roadmap doc.",
     {"confidence": 0.7, "source": "compaction", "metadata": {"generation": 1}}),
    ("user42:typo-phone", USER_42, "entity", "王芳的电话是 138 0000 0000。",
     {"entity_key": "phone:13800000000", "confidence": 0.6, "source": "extractor:l0",
      "tombstone": "typo in the number; corrected to 138 0013 8000"}),
    # global — shared by every agent.
    ("global:fiscal-year", GLOBAL, "fact", "The company's fiscal year starts on April 1.",
     {"confidence": 0.9, "source": "manual"}),
    ("global:commit-procedure", GLOBAL, "procedure",
     "提交代码前：运行 make test → 检查 ruff → 再提交；提交信息用英文祈使句。",
     {"confidence": 0.85, "source": "manual"}),
    ("global:language", GLOBAL, "preference", "Every agent answers in the language the user wrote in.",
     {"confidence": 0.9, "source": "manual"}),
    ("global:ownership", GLOBAL, "relationship",
     "agent:ops-bot owns infrastructure knowledge; agent:assistant owns the user's personal details.",
     {"confidence": 0.85, "source": "manual"}),
    ("global:wiki", GLOBAL, "fact", "公司内网 wiki 的地址是 wiki.example.internal。",
     {"confidence": 0.8, "source": "manual"}),
    ("global:ticket-in-commit", GLOBAL, "remember",
     "Remember: production changes need a ticket number in the commit message.",
     {"confidence": 0.9, "source": "remember"}),
]  # fmt: skip


# The recall the playground offers on a fresh demo: the agent is calling the tool, so the guessed call
# format above is filtered while the gotcha about the same tool is recalled.
FILTER_EXAMPLE_KEY = "ops:article-list-call-format"
FILTER_EXAMPLE = {"q": "how do I call article-list-query", "scope": OPS, "tools": "mcp__ata__article-list-query"}


# --- demo transcripts ---------------------------------------------------------------------
# Two conversations for the Transcripts page, by their agents' own ids (posting one again adds
# nothing): one finished, one that ends mid-call, an assistant tool call with no result (the agent
# crashed), which the projection trims and shows as an open tool exchange.

DEMO_TRANSCRIPTS: list[dict] = [
    {
        "id": "demo-onboarding",
        "scope": ASSISTANT,
        "title": "Onboarding: name, contact and the weekly meeting",
        "messages": [
            {"role": "user", "content": "你好，我叫李东升，叫我东升就行。我的手机号是 186 0000 1234。"},
            {"role": "assistant", "content": "好的东升，记住了。还有什么需要我记下来的吗？"},
            {"role": "user", "content": "记住：每周五下午四点开周会，会前准备好 GPU 利用率报表。"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "call-calendar-1", "name": "calendar::create_event",
                             "arguments": '{"title": "周会", "rrule": "FREQ=WEEKLY;BYDAY=FR", "time": "16:00"}'}]},
            {"role": "tool", "tool_call_id": "call-calendar-1", "content": '{"ok": true, "event_id": "ev-4471"}'},
            {"role": "assistant", "content": "已经在日历里加了每周五 16:00 的周会，会前我会提醒你准备利用率报表。"},
        ],
    },
    {
        "id": "demo-gpu-node-17",
        "scope": OPS,
        "title": "gpu-node-17 keeps rebooting",
        "messages": [
            {"role": "user", "content": "gpu-node-17 keeps rebooting. Check the kernel log."},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "call-logs-1", "name": "mcp__ops__fetch-logs",
                             "arguments": '{"host": "gpu-node-17", "unit": "kernel", "lines": 200}'}]},
            {"role": "tool", "tool_call_id": "call-logs-1",
             "content": "NVRM: Xid 79, GPU has fallen off the bus. watchdog: BUG: soft lockup - CPU#12 stuck"},
            {"role": "assistant", "content": "Xid 79: GPU 3 fell off the bus, which triggers the reboots. "
             "Drain the node and reseat or replace the card."},
            {"role": "user", "content": "Drain it and restart the inference service on the other nodes."},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "call-drain-1", "name": "mcp__ops__drain-node",
                             "arguments": '{"host": "gpu-node-17", "reason": "Xid 79"}'}]},
        ],
    },
]  # fmt: skip


def seed_transcripts() -> int:
    """Store the demo transcripts; return how many were new."""
    return sum(ingestion.ingest(transcript).created for transcript in DEMO_TRANSCRIPTS)


def seed_clean() -> int:
    """Write the clean store through the real write path, with the demo transcripts; return how
    many memories were created."""
    seed_transcripts()
    existing = set(
        Memory.objects.filter(pk__in=[demo_id(key) for key, *_ in CLEAN_MEMORIES]).values_list("pk", flat=True)
    )
    created = 0
    with transaction.atomic():
        for key, scope, kind, text, extra in CLEAN_MEMORIES:
            if demo_id(key) in existing:
                continue
            fields = dict(extra)
            reason = fields.pop("tombstone", None)
            # Hand-written, distinct memories: layers 1-2 still apply, the embedding lookup is skipped.
            memory, is_new = writing.write(
                actor=ACTOR, id=demo_id(key), scope=scope, kind=kind, text=text, semantic=False, **fields
            )
            if is_new:
                created += 1
                if reason:
                    memory.tombstone(reason, actor=ACTOR)
    return created


# --- the polluted legacy store (docs/architecture.md "Raw transcript stored as memory") ---
# An auto-capture path saved user messages verbatim as note/working. In the order they
# arrived; the duplicates are the same message sent again on another day.

ASK_USER_PROMPT = "用 ask_user 工具问我几个问题，收集一下我的偏好，然后帮我记下来"
ASK_USER_3 = "用ask_user问我3个问题，看看我喜欢什么样的回答风格"
LUCKY_QUESTION = "我的幸运数字是啥?"
WHATS_UP = "怎么回事"
THERE = "在吗?"

# One list per day; the session of each day starts around 09:00 Beijing time (01:00 UTC).
POLLUTED_MAIN_DAYS: list[list[str]] = [
    [  # day 1: first contact, onboarding banner leaks in
        "欢迎使用智能助手！你可以直接用中文和我对话，输入 /help 查看可用技能。",
        THERE,
        "你好，先介绍一下你自己，你能做什么",
        "我叫东升，以后就这么叫我",
        ASK_USER_PROMPT,
        "你用美团skill搜索一下看看",
        "搜一下附近评分高的火锅店，四个人吃",
    ],
    [  # day 2
        "我的幸运数字是 88 66 99，记一下",
        LUCKY_QUESTION,
        "帮我查一下明天北京的天气",
        "怎么啦?",
        "刚才那个结果不对，再试一次",
        ASK_USER_PROMPT,
        "你还记得我叫什么吗?",
        "你到底是谁?",
    ],
    [  # day 3: work
        "我们在 IDC 跑了 1000 张 RTX 4070，帮我算一下一个月电费大概多少",
        "查一下 4070 现在的市场价",
        "看下日志，为什么 gateway 一直重启",
        WHATS_UP,
        "ssh 连不上 gpu-node-17 了，帮我看看",
        "重启一下推理服务",
        "搞完了吗",
    ],
    [  # day 4: multi-agent tests leak their prompts
        "Multi-hop task: delegate to agent_a1, have it delegate to agent_a2, then report the combined answer back.",
        "Depth-3 chain test: ask agent_a1 to ask agent_a2 to ask agent_a3 for the current time, then return the chain.",
        "Multi-hop task: delegate to agent_a2 only and check that the reply comes back through agent_a1.",
        "why did agent_a2 not answer?",
        ASK_USER_3,
        "Depth-3 chain test (retry): same as before but with a 30s timeout per hop.",
    ],
    [  # day 5: coding
        "帮我写个 Python 脚本，把 CSV 转成 JSON",
        "把上面的代码改成异步的",
        "commit 一下，never add Co-Authored-By to commits",
        "push 到远程仓库，然后开个 PR",
        "帮我跑一下测试",
        "为什么又失败了",
        "继续",
        "The previous tool call failed because its arguments were not valid JSON. Repair the call and retry "
        "without apologizing.",
    ],
    [  # day 6
        THERE,
        ASK_USER_PROMPT,
        "用飞书给张伟发个消息，说会议改到下午三点",
        "卡住了吗，怎么没反应",
        "算了，不用了",
        "hello, are you there?",
        "what's the status of the deploy?",
    ],
    [  # day 7: a repair prompt and the memory feature being poked at
        "[repair] 上一轮的工具调用没有 tool_result，请重新发起这次调用，不要重复之前的回答。",
        "测试一下记忆功能",
        "你能记住我说过的话吗?",
        LUCKY_QUESTION,
        "你刚才说的我没看懂",
        "简单点说",
    ],
    [  # day 8
        ASK_USER_3,
        "给我讲个笑话",
        "今天几号",
        "订一张周五去上海的高铁票",
        "怎么还没好",
        "帮我看看这个报错：ModuleNotFoundError: No module named 'torch'",
        "can you summarize this thread for me",
        "帮我把这段话翻译成英文：我们下周二上线新版本",
    ],
    [  # day 9: the heartbeat and compaction prompts, sent with the user role
        "HEARTBEAT: check pending tasks and reply HEARTBEAT_OK if there is nothing to do.",
        "Summarize the conversation above for long-term memory. Keep decisions and open tasks, drop chit-chat.",
        ASK_USER_PROMPT,
        "把刚才的结果存成文件发我",
        "用 browser skill 打开 github 看一下 issue 列表",
        WHATS_UP,
    ],
    [  # day 10
        "查一下美团外卖上那家店几点关门",
        "明天早上九点提醒我开会",
        "不对不对，你再想想",
        "速度太慢了",
        "这个 skill 怎么用",
        "列出你现在能用的工具",
        "图片发你了，看一下",
    ],
    [  # day 11
        "[Onboarding] Welcome back! New skills are available: meituan, feishu, browser. Say 'help' to list them.",
        "ok thanks, that's all for now",
        ASK_USER_PROMPT,
        "retry the last command",
        "把 README 里的安装步骤补全",
        "可以了，就这样吧",
        "语音转文字是不是有问题",
    ],
    [  # day 12
        "好像没反应，你还活着吗",
        "网关又挂了，赶紧看看",
        "ping",
        "晚点再说吧",
    ],
]
POLLUTED_MAIN: list[str] = [text for day in POLLUTED_MAIN_DAYS for text in day]
POLLUTED_TEST_W: list[str] = [
    "agent_a1: received the delegation from main, forwarding to agent_a2",
    "Depth-3 chain test, level 2 reached: passing the question to agent_a3",
    "ping from test-w, reply pong",
    "多智能体测试：a2 已收到任务，正在把结果回传给 a1",
]
POLLUTED_DUPLICATES = {ASK_USER_PROMPT: 5, ASK_USER_3: 2, LUCKY_QUESTION: 2, WHATS_UP: 2, THERE: 2}
TEST_W_DAY = 3


def polluted_records(now: datetime | None = None) -> list[dict]:
    """The 85 legacy notes as import records, one session a day over the last days."""
    now = now or timezone.now()
    start = (now - timedelta(days=len(POLLUTED_MAIN_DAYS) + 1)).replace(hour=1, minute=0, second=0, microsecond=0)
    sessions = [[("agent:main", text) for text in day] for day in POLLUTED_MAIN_DAYS]
    # The multi-agent test ran on day 4: its agents' chatter follows the prompts that started it.
    sessions[TEST_W_DAY] += [("agent:test-w", text) for text in POLLUTED_TEST_W]
    records = []
    for day, session in enumerate(sessions):
        for slot, (scope, text) in enumerate(session):
            index = len(records)
            created_at = start + timedelta(days=day, minutes=slot * 23 + index % 11, seconds=index * 13 % 60)
            records.append(
                {
                    "id": str(demo_id(f"polluted:{index:03d}")),
                    "scope": scope,
                    "kind": "note",
                    "tier": "working",
                    "text": text,
                    "importance": 0.5,
                    "confidence": 0.5,
                    "pinned": False,
                    "source": "user",
                    "metadata": {"captured_by": "auto_capture", "role": "user"},
                    "created_at": created_at,
                    "expires_at": None,
                }
            )
    return records


def seed_polluted(now: datetime | None = None) -> int:
    """Insert the polluted store faithfully (duplicates kept, no dedup); return how many were created."""
    now = now or timezone.now()
    records = [jsonl.parse_record(record) for record in polluted_records(now)]
    existing = set(Memory.objects.filter(pk__in=[r["id"] for r in records]).values_list("pk", flat=True))
    missing = [jsonl.new_memory(record, now=now) for record in records if record["id"] not in existing]
    with transaction.atomic():
        return jsonl.insert_memories(missing, actor=ACTOR, batch=uuid.uuid4() if missing else None)
