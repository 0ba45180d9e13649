"""Planted secrets: one fake value of each kind the redaction knows, the line a crash log
carries it on, and a realistic vLLM crash log with all of them planted in its launch
command, its environment dump and its traceback. Shared by the core's per-kind tests
and the end-to-end tests (service and client). Every value is made up."""

from __future__ import annotations

import random
from dataclasses import dataclass

_RNG = random.Random(20250817)  # fixed: the same fake values on every run
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"


def fake(size: int, alphabet: str = _ALNUM) -> str:
    """A random-looking value with at least one upper, lower and digit (when the
    alphabet has them), so it looks like what it stands for."""
    while True:
        value = "".join(_RNG.choice(alphabet) for _ in range(size))
        if alphabet != _ALNUM or (any(c.isupper() for c in value) and any(c.islower() for c in value)
                                  and any(c.isdigit() for c in value)):
            return value


@dataclass(frozen=True)
class Planted:
    kind: str
    line: str  # a log line carrying it
    secret: str  # what must never be seen again (the random part)


def _pem(kind: str, lines: int = 6) -> tuple[str, list[str]]:
    body = [fake(64, _B64) for _ in range(lines - 1)] + [fake(28, _B64) + "=="]
    label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    return label, body


HF = fake(34)
HF_IN_MESSAGE = fake(34)
OPENAI = fake(48)
OPENAI_PROJ = fake(40)
ANTHROPIC = fake(40)
AWS_ID = "AKIA" + fake(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
AWS_SECRET = fake(30) + "/" + fake(9)
GHP = fake(36)
GHO = fake(36)
GITHUB_PAT = "11" + fake(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + "_" + fake(59)
GLPAT = fake(20)
SLACK = "1234567890-0987654321-" + fake(24)
SLACK_HOOK = "T0" + fake(8, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + "/B0" + fake(8, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + "/" + fake(24)
STRIPE = fake(24)
GOOGLE = "Sy" + fake(33)
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ" + fake(30) + "." + fake(43)
BEARER = fake(40)
BASIC = fake(28, _B64) + "=="
PG_PASSWORD = fake(14) + "!x"
REDIS_PASSWORD = fake(18)
AZURE_KEY = fake(86, _B64) + "=="
AZURE_SIG = fake(30) + "%3D"
API_KEY_DICT = fake(32, _HEX)
WANDB = fake(40, _HEX)
WANDB_ENV = fake(40, _HEX)
API_KEY_FLAG = "local-" + fake(24)
HF_FLAG = fake(34)
ARGV_KEY = "local-" + fake(20)
ENV_SECRET = fake(32)
NGC = fake(64)
NGC_LEGACY = fake(84, _B64)
DATABRICKS = fake(32, _HEX)
NPM = fake(36)
ENTROPY = fake(32)
DSN_PASSWORD = fake(12)
DOCKER_PASSWORD = fake(40)
GCP_KEY_ID = fake(40, _HEX)
GCP_KEY_BODY = fake(64, _B64)
OAUTH = fake(60)
X_API_KEY = fake(32)
CREDENTIALS = fake(24)
RSA_LABEL, RSA_BODY = _pem("RSA")
EC_LABEL, EC_BODY = _pem("EC", 3)
SSH_LABEL, SSH_BODY = _pem("OPENSSH", 7)
PKCS8_LABEL, PKCS8_BODY = _pem("")

KINDS: tuple[Planted, ...] = (
    Planted("hf-token", f"+ export HF_TOKEN=hf_{HF}", HF),
    Planted("hf-token-in-a-message", f"huggingface_hub.errors.HfHubHTTPError: 401 for token hf_{HF_IN_MESSAGE}",
            HF_IN_MESSAGE),
    Planted("openai", f"openai.AuthenticationError: Incorrect API key provided: sk-{OPENAI}", OPENAI),
    Planted("openai-project", f"using key sk-proj-{OPENAI_PROJ} for the judge", OPENAI_PROJ),
    Planted("anthropic", f"client = Anthropic(api_key=\"sk-ant-api03-{ANTHROPIC}\")", ANTHROPIC),
    Planted("aws-access-key-id", f"aws_access_key_id = {AWS_ID}", AWS_ID[4:]),
    Planted("aws-secret-credentials-file", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    Planted("github-ghp", f"+ git clone https://oauth2:ghp_{GHP}@github.com/org/repo", GHP),
    Planted("github-gho", f"GH token gho_{GHO} expired", GHO),
    Planted("github-pat", f"pip install git+https://github.com/org/vllm-fork --token github_pat_{GITHUB_PAT}",
            GITHUB_PAT),
    Planted("gitlab", f"remote: HTTP Basic: Access denied for glpat-{GLPAT}", GLPAT),
    Planted("slack-token", f"slack_sdk.errors.SlackApiError: invalid_auth xoxb-{SLACK}", SLACK),
    Planted("slack-webhook", f"alerting to https://hooks.slack.com/services/{SLACK_HOOK}", SLACK_HOOK),
    Planted("stripe", f"billing key sk_live_{STRIPE}", STRIPE),
    Planted("google-api-key", f"GOOGLE_PLACES key=AIza{GOOGLE}", GOOGLE),
    Planted("gcp-service-account-json",
            '{"type": "service_account", "project_id": "kb-test", "private_key_id": "' + GCP_KEY_ID + '", '
            '"private_key": "-----BEGIN PRIVATE KEY-----\\n' + GCP_KEY_BODY + '\\n-----END PRIVATE KEY-----\\n", '
            '"client_email": "kb@kb-test.iam.gserviceaccount.com"}', GCP_KEY_BODY),
    Planted("gcp-private-key-id", '"private_key_id": "' + GCP_KEY_ID + '"', GCP_KEY_ID),
    Planted("jwt", f"jwt.exceptions.ExpiredSignatureError: Signature has expired: {JWT}", JWT),
    Planted("bearer", f"curl -sf -H 'Authorization: Bearer {BEARER}' http://127.0.0.1:8000/v1/models", BEARER),
    Planted("basic-auth", f"-H 'Authorization: Basic {BASIC}'", BASIC),
    Planted("url-password", f"KB_DATABASE_URL=postgresql://kb:{PG_PASSWORD}@db.internal:5432/kb", PG_PASSWORD),
    Planted("redis-password", f"redis.exceptions.ConnectionError: Error connecting to redis://:{REDIS_PASSWORD}@cache:6379/0",
            REDIS_PASSWORD),
    Planted("azure-account-key", "AZURE_STORAGE=DefaultEndpointsProtocol=https;AccountName=kbstore;"
            f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net", AZURE_KEY),
    Planted("azure-sas", f"GET https://kbstore.blob.core.windows.net/w/model.bin?sv=2022-11-02&sp=r&sig={AZURE_SIG} 403",
            AZURE_SIG),
    Planted("api-key-dict-entry", f"headers={{'api-key': '{API_KEY_DICT}', 'Content-Type': 'application/json'}}",
            API_KEY_DICT),
    Planted("wandb-login", f"+ wandb login {WANDB}", WANDB),
    Planted("wandb-env", f"WANDB_API_KEY={WANDB_ENV}", WANDB_ENV),
    Planted("api-key-flag", f"--api-key {API_KEY_FLAG}", API_KEY_FLAG),
    Planted("hf-token-flag", f"--hf-token={HF_FLAG}", HF_FLAG),
    Planted("api-key-in-an-argv-list", f"sys.argv: ['vllm', 'serve', '--api-key', '{ARGV_KEY}', '--port', '8000']",
            ARGV_KEY),
    Planted("env-assignment", f"MY_SERVICE_SECRET={ENV_SECRET}", ENV_SECRET),
    Planted("ngc-key", f"NGC_CLI_API_KEY nvapi-{NGC}", NGC),
    Planted("ngc-legacy-env", f"NGC_API_KEY={NGC_LEGACY}", NGC_LEGACY),
    Planted("databricks", f"databricks.sdk.errors.Unauthenticated: dapi{DATABRICKS} is invalid", DATABRICKS),
    Planted("npm-token", f"//registry.npmjs.org/:_authToken=npm_{NPM}", NPM),
    Planted("high-entropy-key-like-name", f"  inference_service_token: {ENTROPY}", ENTROPY),
    Planted("dsn-password", f"psycopg.OperationalError: host=db user=kb password={DSN_PASSWORD} dbname=kb", DSN_PASSWORD),
    Planted("docker-login", f"+ docker login nvcr.io -u '$oauthtoken' -p {DOCKER_PASSWORD}", DOCKER_PASSWORD),
    Planted("google-oauth", f"google.auth: refreshed ya29.{OAUTH}", OAUTH),
    Planted("x-api-key-header", f"X-API-Key: {X_API_KEY}", X_API_KEY),
    Planted("credentials-yaml", f"credentials: {CREDENTIALS}", CREDENTIALS),
)

PEM_BLOCKS = ((RSA_LABEL, RSA_BODY), (EC_LABEL, EC_BODY), (SSH_LABEL, SSH_BODY), (PKCS8_LABEL, PKCS8_BODY))
PEM_SECRETS = tuple(line for _, body in PEM_BLOCKS for line in body)


def pem_lines(label: str, body: list[str], prefix: str = "") -> list[str]:
    return [f"{prefix}-----BEGIN {label}-----", *(prefix + line for line in body), f"{prefix}-----END {label}-----"]


# What the upload fields carry (kb run's `command` above all).
FIELD_SECRETS = {
    "command": (f"env HF_TOKEN=hf_{HF} WANDB_API_KEY={WANDB_ENV} vllm serve meta-llama/Llama-3.1-8B-Instruct "
                f"--api-key {API_KEY_FLAG} --hf-token {HF_FLAG} --port 8000", (HF, WANDB_ENV, API_KEY_FLAG, HF_FLAG)),
    "host": (f"gpu-node-07 AccountKey={AZURE_KEY}", (AZURE_KEY,)),
    "reporter": (f"alice ghp_{GHP}", (GHP,)),
    "model": (f"meta-llama/Llama-3.1-8B-Instruct?token=hf_{HF_IN_MESSAGE}", (HF_IN_MESSAGE,)),
    "model_arch": (f"LlamaForCausalLM sk-{OPENAI}", (OPENAI,)),
    "gpu": (f"NVIDIA H100 80GB HBM3 glpat-{GLPAT}", (GLPAT,)),
    "engine_version": (f"0.11.0 sk_live_{STRIPE}", (STRIPE,)),
    "cuda_visible_devices": (f"0,1 xoxb-{SLACK}", (SLACK,)),
    "torch_version": (f"2.8.0 AIza{GOOGLE}", (GOOGLE,)),
}

ALL_SECRETS = tuple(dict.fromkeys([p.secret for p in KINDS] + list(PEM_SECRETS)
                                  + [s for _, secrets in FIELD_SECRETS.values() for s in secrets]))

# Not secrets: each must come out exactly as it went in.
NOT_SECRETS = (
    "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/"
    "5f0b02c75b57c5855da9ae460ce51323ea669d8a/config.json",
    "0.11.0+g3a4b5c6",
    "meta-llama/Llama-3.1-8B-Instruct",
    "max_num_batched_tokens=8192",
    "tokenizer='meta-llama/Llama-3.1-8B-Instruct'",
    "--tokenizer-mode auto",
    "--max-num-batched-tokens 8192",
    "kv_cache_dtype=auto",
    "num_tokens=512",
    "max_tokens=16",
    "cudaErrorIllegalAddress",
    "error code 700",
    "<vllm.v1.engine.core.EngineCore object at 0x7f3a2b1c4d50>",
    "fingerprint 3f2a9c1b7e6d4a5f8c0b1e2d3a4f5c6b",
    "key_cache",
    "monkey",
    "TOKENIZERS_PARALLELISM=false",
    "cache_key=5f0b02c75b57c5855da9ae460ce51323ea669d8a",
    "eos_token='</s>'",
    "Avg prompt throughput: 0.0 tokens/s",
    "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b",
    "150k-token vocabularies",
    "prompt-token tensor",
    "Authorization header missing",
    "the password is not set: see --password-file",
)

_P = "(APIServer pid=3310)"
_E = "(EngineCore_DP0 pid=3502)"
_TS = "08-14 06:04:58"


def vllm_crash_log() -> str:
    """A vLLM v1 start-up that dies in the engine core, in vLLM's own format: the launch
    script's trace (`set -x`) and env dump first, every kind planted somewhere, the root
    cause's message holding secrets too."""
    env_dump = [p.line for p in KINDS]
    pem = [line for label, body in PEM_BLOCKS for line in pem_lines(label, body)]
    launch = (f"+ exec vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --api-key {API_KEY_FLAG} "
              f"--hf-token {HF_FLAG} --tokenizer-mode auto --max-num-batched-tokens 8192 --port 8000")
    frames = [
        ("vllm/v1/engine/core.py", 691, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        ("vllm/v1/engine/core.py", 80, "__init__", "self.model_executor = executor_class(vllm_config)"),
        ("vllm/v1/worker/gpu_model_runner.py", 1983, "load_model", "self.model = model_loader.load_model("),
        ("vllm/model_executor/model_loader/default_loader.py", 246, "download_model",
         "self._prepare_weights(model_config.model,"),
        ("vllm/model_executor/model_loader/weight_utils.py", 295, "download_weights_from_hf",
         "hf_folder = snapshot_download("),
    ]
    traceback = [f"{_E} ERROR {_TS} [core.py:700] EngineCore failed to start.",
                 f"{_E} ERROR {_TS} [core.py:700] Traceback (most recent call last):"]
    for path, line, function, code in frames:
        traceback += [f'{_E} ERROR {_TS} [core.py:700]   File "/srv/vllm/.venv/lib/python3.11/site-packages/{path}", '
                      f"line {line}, in {function}",
                      f"{_E} ERROR {_TS} [core.py:700]     {code}"]
    traceback.append(f"{_E} ERROR {_TS} [core.py:700] huggingface_hub.errors.GatedRepoError: 401 Client Error for "
                     f"hf_{HF_IN_MESSAGE} via redis://:{REDIS_PASSWORD}@cache:6379/0 (Bearer {BEARER}, "
                     f"api_key='{API_KEY_DICT}', AccountKey={AZURE_KEY})")
    return "\n".join([
        "+ set -x",
        *env_dump,
        *pem,
        launch,
        "INFO 08-14 06:01:09 [__init__.py:241] Automatically detected platform cuda.",
        f"{_P} INFO 08-14 06:01:12 [api_server.py:1805] vLLM API server version 0.11.0+g3a4b5c6",
        f"{_P} INFO 08-14 06:01:12 [utils.py:326] non-default args: {{'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', "
        f"'api_key': ['{API_KEY_FLAG}'], 'hf_token': 'hf_{HF}', 'model': 'meta-llama/Llama-3.1-8B-Instruct', "
        "'max_model_len': 32768, 'max_num_batched_tokens': 8192, 'tokenizer_mode': 'auto'}",
        f"{_P} INFO 08-14 06:01:19 [__init__.py:711] Resolved architecture: LlamaForCausalLM",
        f"{_E} INFO 08-14 06:01:27 [core.py:74] Initializing a V1 LLM engine (v0.11.0+g3a4b5c6) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, tokenizer='meta-llama/Llama-3.1-8B-Instruct', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, dtype=torch.bfloat16, max_seq_len=32768, "
        "tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto, device_config=cuda",
        f"{_E} INFO 08-14 06:01:40 [weight_utils.py:296] Using model weights format ['*.safetensors'] from "
        "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/"
        "5f0b02c75b57c5855da9ae460ce51323ea669d8a/config.json",
        *traceback,
        f"{_P} RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
        "",
    ])


def non_secret_log() -> str:
    """A crash log full of things that look like secrets to a careless rule."""
    return "\n".join([
        f"{_P} INFO 08-14 06:01:12 [api_server.py:1805] vLLM API server version 0.11.0+g3a4b5c6",
        f"{_P} INFO 08-14 06:01:12 [utils.py:326] non-default args: {{'model': 'meta-llama/Llama-3.1-8B-Instruct', "
        "'max_num_batched_tokens': 8192, 'tokenizer_mode': 'auto'}",
        "+ exec vllm serve meta-llama/Llama-3.1-8B-Instruct --tokenizer-mode auto --max-num-batched-tokens 8192",
        f"{_E} INFO 08-14 06:01:27 [core.py:74] Initializing a V1 LLM engine (v0.11.0+g3a4b5c6) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct', tokenizer='meta-llama/Llama-3.1-8B-Instruct', tokenizer_mode=auto, "
        "max_num_batched_tokens=8192, kv_cache_dtype=auto, num_tokens=512, max_tokens=16",
        f"{_E} INFO 08-14 06:01:40 [weight_utils.py:296] Loading /root/.cache/huggingface/hub/"
        "models--meta-llama--Llama-3.1-8B-Instruct/snapshots/5f0b02c75b57c5855da9ae460ce51323ea669d8a/config.json",
        f"{_E} INFO 08-14 06:01:41 [utils.py:1] TOKENIZERS_PARALLELISM=false cache_key=5f0b02c75b57c5855da9ae460ce51323ea669d8a "
        "eos_token='</s>' key_cache monkey",
        f"{_E} INFO 08-14 06:01:42 [loggers.py:1] Avg prompt throughput: 0.0 tokens/s",
        f"{_E} WARNING 08-14 06:01:42 [sampler.py:1] 150k-token vocabularies: the prompt-token tensor is large",
        f"{_P} WARNING 08-14 06:01:42 [api_server.py:1] Authorization header missing; the password is not set: "
        "see --password-file",
        f"{_E} INFO 08-14 06:01:43 [hub.py:1] fetched https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/"
        "config.json sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 "
        "commit 3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b fingerprint 3f2a9c1b7e6d4a5f8c0b1e2d3a4f5c6b",
        f"{_E} ERROR {_TS} [core.py:700] EngineCore failed to start.",
        f"{_E} ERROR {_TS} [core.py:700] Traceback (most recent call last):",
        f'{_E} ERROR {_TS} [core.py:700]   File "/srv/vllm/.venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", '
        "line 691, in run_engine_core",
        f"{_E} ERROR {_TS} [core.py:700]     engine_core = EngineCoreProc(*args, **kwargs)",
        f"{_E} ERROR {_TS} [core.py:700] torch.AcceleratorError: CUDA error: an illegal memory access was encountered "
        "(cudaErrorIllegalAddress, error code 700) in <vllm.v1.engine.core.EngineCore object at 0x7f3a2b1c4d50>",
        f"{_P} RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
        "",
    ])
