"""The synthetic store of the latency benchmarks (bench/retrieval_latency.py, bench/recall_latency.py).

Shaped like a real agent's: English and Chinese memories (about half each) built from templates
with random ids, hosts, numbers and hashes, spread over 20 scopes, with one big scope
`agent:main` (~40%) and one small one `agent:test-w` (~0.3%); and queries drawn from it. Memory
i depends only on the seed and i, so a smaller corpus is the start of a larger one.
"""

from __future__ import annotations

import itertools
import random
import re
import uuid
from collections import defaultdict

NAMESPACE = uuid.UUID("5b0c4f0e-3d1a-4c55-8f39-7a1e2b6c9d10")
MAIN_SCOPE, SMALL_SCOPE = "agent:main", "agent:test-w"
# 20 scopes: agent:main ~40%, agent:test-w ~0.3% (30 memories at 10k, 300 at 100k).
SCOPE_WEIGHTS = {
    MAIN_SCOPE: 40.0,
    "user:42": 8.0,
    "global": 6.0,
    **{f"agent:bot-{i:02d}": weight for i, weight in enumerate([6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 1.5, 1.5, 1, 1, 1])},
    SMALL_SCOPE: 0.3,
}

# --- the synthetic corpus ------------------------------------------------------------------------

# fmt: off
PEOPLE = (
    "Alice Chen", "Bob Miller", "Carol Wu", "Dave Kumar", "Erin Walsh", "Frank Ortiz", "Grace Lee", "Heidi Novak",
    "Ivan Petrov", "Judy Park", "Karl Jensen", "Liam Murphy", "Maya Singh", "Nina Rossi", "Oscar Silva",
    "Priya Nair", "Quinn Adams", "Rosa Diaz", "Sam Taylor", "Tara Kelly", "Uma Shah", "Victor Hugo",
    "Wendy Brooks", "Yusuf Demir", "Zoe Martin",
)
PEOPLE_ZH = (
    "张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏", "黄勇", "周杰", "吴霞", "徐涛", "孙丽", "马超", "朱琳",
    "胡斌", "郭鹏", "何平", "高翔", "林峰", "罗敏", "梁宇", "宋佳", "郑浩", "谢婷", "韩雪",
)
SERVICES = (
    "payments", "billing", "search", "auth", "gateway", "scheduler", "notifier", "ledger", "inventory", "checkout",
    "recommender", "crawler", "webhooks", "reporting", "media", "chat", "embedding", "feature-store", "etl",
    "mailer", "geo", "pricing", "fraud", "audit", "export",
)
SERVICES_ZH = (
    "支付", "账单", "搜索", "鉴权", "网关", "调度", "通知", "账本", "库存", "结算", "推荐", "爬虫", "报表",
    "媒体", "聊天", "消息队列", "数据同步", "日志", "监控", "告警", "定价", "风控", "审计", "导出", "地图",
)
COMPONENTS = (
    "database", "cache", "queue", "load balancer", "CDN", "object storage", "cron job", "TLS certificate",
    "DNS record", "container image", "Helm chart", "schema migration", "search index", "read replica", "backup",
    "connection pool", "rate limiter", "feature flag", "service mesh", "secret store",
)
COMPONENTS_ZH = (
    "数据库", "缓存", "队列", "负载均衡", "证书", "域名解析", "镜像", "迁移脚本", "索引", "只读副本", "备份",
    "定时任务", "配置中心", "防火墙", "对象存储", "连接池", "限流器", "灰度开关", "服务网格", "密钥管理",
)
BLOCKERS = (
    "a vendor quote", "legal review", "the security audit", "a missing API key", "capacity planning",
    "the data team", "a flaky integration test", "budget approval", "the network change window",
)
BLOCKERS_ZH = ("供应商报价", "法务审核", "安全审计", "缺少密钥", "容量评估", "数据组排期", "集成测试不稳定", "预算审批")
GPUS = ("RTX 4070", "RTX 4090", "A100", "H100", "L40S", "RTX 3090", "V100", "A10")
IDCS = ("Shanghai", "Beijing", "Hangzhou", "Shenzhen", "Frankfurt", "Singapore", "Virginia", "Tokyo")
IDCS_ZH = ("上海", "北京", "杭州", "深圳", "法兰克福", "新加坡", "弗吉尼亚", "东京")
TOOLS = ("git", "kubectl", "terraform", "docker", "pytest", "cargo", "ripgrep", "jq", "helm", "ansible", "psql")
STYLES = ("terse", "detailed", "bullet-point", "step-by-step", "formal", "casual")
STYLES_ZH = ("简洁", "详细", "分点列出", "一步一步", "正式", "口语化")
CUSTOMERS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne Corp", "Tyrell", "Cyberdyne")
CUSTOMERS_ZH = ("华星科技", "蓝海集团", "启明数据", "远航物流", "青云网络", "天一医疗", "北辰能源", "众合零售")
PLANS = ("starter", "team", "business", "enterprise")
PLANS_ZH = ("基础版", "团队版", "商业版", "企业版")
TEAMS = ("platform", "infra", "data", "growth", "payments", "sre", "mobile", "ml")
TEAMS_ZH = ("平台", "基础设施", "数据", "增长", "支付", "运维", "移动端", "算法")
BRANCHES = ("main", "release", "develop", "hotfix")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
WEEKDAYS_ZH = ("一", "二", "三", "四", "五")
COMMANDS = ("make test", "npm run lint", "cargo test", "pytest -q", "terraform plan", "helm diff", "go vet ./...")
ROLES = ("web", "api", "db", "cache", "worker", "gpu", "edge", "batch")
DOMAINS = ("prod.acme.net", "staging.acme.net", "corp.hooli.io", "dc1.globex.com")
TICKET_PROJECTS = ("OPS", "INFRA", "PAY", "SRE", "DATA", "SEC", "ML")
# fmt: on


def _values(rnd: random.Random) -> dict:
    """Random ids, hosts and numbers a template may use."""
    person, person2 = rnd.sample(PEOPLE, 2)
    version = f"v{rnd.randint(1, 9)}.{rnd.randint(0, 30)}.{rnd.randint(0, 20)}"
    return {
        "person": person,
        "person2": person2,
        "first": person.split()[0],
        "zperson": rnd.choice(PEOPLE_ZH),
        "zperson2": rnd.choice(PEOPLE_ZH),
        "service": rnd.choice(SERVICES),
        "zservice": rnd.choice(SERVICES_ZH),
        "component": rnd.choice(COMPONENTS),
        "zcomponent": rnd.choice(COMPONENTS_ZH),
        "blocker": rnd.choice(BLOCKERS),
        "zblocker": rnd.choice(BLOCKERS_ZH),
        "gpu": rnd.choice(GPUS),
        "idc": rnd.choice(IDCS),
        "zidc": rnd.choice(IDCS_ZH),
        "tool": rnd.choice(TOOLS),
        "style": rnd.choice(STYLES),
        "zstyle": rnd.choice(STYLES_ZH),
        "customer": rnd.choice(CUSTOMERS),
        "zcustomer": rnd.choice(CUSTOMERS_ZH),
        "plan": rnd.choice(PLANS),
        "zplan": rnd.choice(PLANS_ZH),
        "team": rnd.choice(TEAMS),
        "zteam": rnd.choice(TEAMS_ZH),
        "branch": rnd.choice(BRANCHES),
        "weekday": rnd.choice(WEEKDAYS),
        "zweekday": rnd.choice(WEEKDAYS_ZH),
        "cmd": rnd.choice(COMMANDS),
        "host": f"{rnd.choice(ROLES)}-{rnd.randint(1, 60):02d}.{rnd.choice(DOMAINS)}",
        "ip": f"10.{rnd.randint(0, 255)}.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}",
        "port": rnd.choice((5432, 6379, 8080, 9200, 3306, 27017)),
        "ticket": f"{rnd.choice(TICKET_PROJECTS)}-{rnd.randint(100, 99999)}",
        "hash": f"{rnd.getrandbits(160):040x}"[: rnd.choice((7, 12, 40))],
        "phone": f"1{rnd.choice('3456789')}{rnd.randint(0, 999_999_999):09d}",
        "email": f"{person.split()[0].lower()}.{rnd.randint(1, 999)}@{rnd.choice(DOMAINS)}",
        "version": version,
        "version2": f"v{rnd.randint(1, 9)}.{rnd.randint(0, 30)}.{rnd.randint(0, 20)}",
        "date": f"2025-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
        "time": f"{rnd.randint(8, 19):02d}:{rnd.choice(('00', '15', '30', '45'))}",
        "n": rnd.randint(2, 120),
        "count": rnd.choice((8, 16, 64, 128, 256, 500, 1000, 2048)),
        "code": rnd.choice((137, 1, 2, 255, 500, 502, 503, 429, 404)),
        "amount": rnd.randint(2, 900) * 100,
        "rack": f"R{rnd.randint(1, 40):02d}",
        "room": f"{rnd.randint(2, 30)}{rnd.choice('ABCD')}",
        "lucky": " ".join(str(rnd.randint(1, 99)) for _ in range(3)),
    }


EN_TEMPLATES = (
    ("relationship", "{person} owns the {service} service; escalate to {person2} if it is down for over {n} minutes."),
    ("fact", "Deploying {service} {version} to {host} failed with exit code {code}; rolled back to {version2}."),
    (
        "preference",
        "Since {date}, for {service} work the user prefers {style} answers and {tool} commands shown first.",
    ),
    ("fact", "The {idc} IDC runs {count} {gpu} GPUs in rack {rack}."),
    ("project_state", "Ticket {ticket} tracks the {component} migration for {service}, blocked on {blocker}."),
    ("procedure", "Release {service}: run `{cmd}`, check the {component} dashboard, then merge to {branch}."),
    ("entity", "{person}'s phone number is {phone}, e-mail {email}."),
    ("fact", "The {service} API returns HTTP {code} when page > {n}; use the cursor instead."),
    ("project_state", "Commit {hash} on {branch} fixed the {component} leak in {service}, shipped in {version}."),
    (
        "preference",
        "Never add Co-Authored-By to {service} commits (agreed {date}); {first} squashes merges on {weekday}s.",
    ),
    ("fact", "The {service} database is at {ip}:{port}; credentials are in vault under secret/{service}."),
    ("remember", "Remember: the {customer} demo is on {date} at {time} in room {room}."),
    ("summary", "Session summary: {service} p95 was {n} ms on {host}; raised the {component} limit, opened {ticket}."),
    ("fact", "{customer} pays {amount} USD a month for the {plan} plan, renewal due {date}."),
    ("relationship", "{first} and {person2} are on the {team} team; {first} runs the {weekday} standup."),
)
ZH_TEMPLATES = (
    ("relationship", "{zperson}负责{zservice}服务,故障超过{n}分钟先找{zperson2}。"),
    ("fact", "{zservice}服务{version}部署到{host}失败,退出码{code},已回滚到{version2}。"),
    ("preference", "从{date}起,处理{zservice}时用户喜欢{zstyle}的回答,执行{tool}命令前要先给他看。"),
    ("fact", "{zidc}机房有{count}张{gpu}显卡,在机架{rack}。"),
    ("project_state", "工单{ticket}跟踪{zservice}的{zcomponent}迁移,目前卡在{zblocker}。"),
    ("procedure", "{zservice}发布流程:先跑`{cmd}`,再看{zcomponent}监控,最后合并到{branch}。"),
    ("entity", "{zperson}的手机号是{phone},邮箱是{email}。"),
    ("fact", "{zservice}接口在page大于{n}时返回{code},要改用cursor翻页。"),
    ("project_state", "提交{hash}修复了{zservice}的{zcomponent}泄漏,随{version}上线。"),
    ("entity", "用户的幸运数字是{lucky},生日是{date}。"),
    ("remember", "记住:给{zcustomer}的演示在{date} {time},会议室{room}。"),
    ("summary", "会话总结:排查了{host}上{zservice}的延迟,p95为{n}毫秒,新开工单{ticket}。"),
    ("fact", "{zcustomer}每月付{amount}元购买{zplan},{date}续费。"),
    ("relationship", "{zperson}和{zperson2}都在{zteam}组,{zperson}每周{zweekday}主持例会。"),
    ("preference", "{zservice}仓库的提交不要加Co-Authored-By({date}约定),{zperson}每周{zweekday}合并分支。"),
)
EN_QUERIES = (
    "who owns the {service} service",
    "{service} deploy failed with exit code {code}",
    "how many {gpu} GPUs are in {idc}",
    "release steps for {service}",
    "{first} phone number",
    "what is blocking the {component} migration",
    "how does the user like answers",
    "{service} API error when paging",
    "when does {customer} renew",
    "where are the {service} database credentials",
)
ZH_QUERIES = (
    "{zservice}服务谁负责",
    "{zidc}机房有多少{gpu}",
    "{zperson}的手机号",
    "{zservice}部署失败怎么回滚",
    "用户喜欢什么样的回答",
    "{zcomponent}迁移卡在哪里",
    "{zservice}发布流程",
    "{zcustomer}什么时候续费",
    "幸运数字是多少",
    "{zteam}组谁主持例会",
)
# Exact tokens a user pastes: ticket ids, commit hashes, phone numbers, IPs, host names.
EXACT_TOKEN_RE = re.compile(
    r"[A-Z]+-\d+|\b[0-9a-f]{7,40}\b|\b1\d{10}\b|\d+\.\d+\.\d+\.\d+|[a-z]+-\d{2}\.[a-z]+\.[a-z]+\.(?:net|io|com)"
)


def memory_at(seed: int, i: int) -> dict:
    """The i-th memory of the corpus; memory i never depends on the corpus size."""
    rnd = random.Random(f"{seed}:{i}")
    templates = ZH_TEMPLATES if rnd.random() < 0.5 else EN_TEMPLATES
    kind, template = rnd.choice(templates)
    return {
        "id": uuid.uuid5(NAMESPACE, f"{seed}:{i}"),
        "scope": rnd.choices(list(SCOPE_WEIGHTS), weights=list(SCOPE_WEIGHTS.values()))[0],
        "kind": kind,
        "text": template.format(**_values(rnd)),
        "confidence": round(rnd.uniform(0.55, 0.95), 2),
        "age_minutes": rnd.randint(0, 60 * 24 * 365),
    }


def build_corpus(size: int, seed: int) -> list[dict]:
    """The first `size` memories with distinct texts: a smaller corpus is the start of a larger one."""
    corpus, seen = [], set()
    for i in itertools.count():
        if len(corpus) == size:
            return corpus
        memory = memory_at(seed, i)
        if memory["text"] not in seen:
            seen.add(memory["text"])
            corpus.append(memory)


def build_queries(corpus: list[dict], count: int, seed: int) -> list[str]:
    """About 40% English, 40% Chinese and 20% exact tokens taken from memories of both test scopes."""
    rnd = random.Random(f"{seed}:queries")
    by_scope = defaultdict(list)
    for memory in corpus:
        by_scope[memory["scope"]].append(memory["text"])
    queries = []
    while len(queries) < count:
        pick = rnd.random()
        if pick < 0.4:
            queries.append(rnd.choice(EN_QUERIES).format(**_values(rnd)))
        elif pick < 0.8:
            queries.append(rnd.choice(ZH_QUERIES).format(**_values(rnd)))
        else:
            texts = by_scope[MAIN_SCOPE if len(queries) % 2 else SMALL_SCOPE] or by_scope[MAIN_SCOPE]
            tokens = EXACT_TOKEN_RE.findall(rnd.choice(texts))
            if tokens:
                queries.append(rnd.choice(tokens))
    return queries
