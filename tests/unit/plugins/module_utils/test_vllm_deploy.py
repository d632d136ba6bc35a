"""module_utils.vllm_deploy: the compose project and systemd units of planned services (seed 000 §compose,
seed 001's unit)."""

import shlex

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import vllm_deploy, vllm_plan

GPUS = [{"index": i, "name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "compute_capability": "8.6"}
        for i in range(4)]
MODELS = [
    {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": [0], "port": 8001},
    {"name": "reasoning", "model": "casperhansen/deepseek-r1-distill-qwen-32b-awq", "max_model_len": 8192,
     "gpus": [2, 3], "port": 8003, "enforce_eager": True,
     "lora_modules": [{"name": "sql", "path": "/opt/llm-inference/lora/sql"}]},
]
SETTINGS = {"image": "vllm/vllm-openai:v0.11.0", "bind_address": "127.0.0.1", "hf_home": "/opt/llm-inference/hf-cache",
            "cache_dir": "/opt/llm-inference/vllm-cache", "env_file": "/opt/llm-inference/secrets/vllm.env",
            "offline": True, "venv": "/opt/llm-inference/venv", "user": "vllm", "dir": "/opt/llm-inference"}


@pytest.fixture(scope="module")
def services():
    return vllm_plan.plan(GPUS, MODELS)["services"]


def flag(args, name):
    return args[args.index(name) + 1]


def test_compose_binds_ports_to_localhost_and_reserves_the_planned_gpus(services):
    project = vllm_deploy.compose(services, SETTINGS)
    fast, reasoning = project["services"]["vllm-fast"], project["services"]["vllm-reasoning"]
    assert fast["ports"] == ["127.0.0.1:8001:8000"] and reasoning["ports"] == ["127.0.0.1:8003:8000"]
    devices = reasoning["deploy"]["resources"]["reservations"]["devices"][0]
    assert devices == {"driver": "nvidia", "device_ids": ["2", "3"], "capabilities": ["gpu"]}
    assert fast["ipc"] == "host" and fast["image"] == "vllm/vllm-openai:v0.11.0"
    assert fast["environment"]["HF_HUB_OFFLINE"] == "1" and fast["env_file"] == [SETTINGS["env_file"]]
    assert "/health" in " ".join(fast["healthcheck"]["test"]) and "/v1/models" not in str(fast["healthcheck"])
    assert fast["logging"]["options"]["max-size"] == "50m"


def test_flags_come_from_the_plan(services):
    args = vllm_deploy.compose(services, SETTINGS)["services"]["vllm-reasoning"]["command"]
    assert flag(args, "--model") == "casperhansen/deepseek-r1-distill-qwen-32b-awq"
    assert flag(args, "--served-model-name") == "reasoning" and flag(args, "--tensor-parallel-size") == "2"
    assert flag(args, "--quantization") == "awq" and "--enforce-eager" in args and flag(args, "--port") == "8000"
    planned = [s for s in services if s["name"] == "reasoning"][0]
    assert flag(args, "--max-num-seqs") == str(planned["max_num_seqs"])
    assert args[args.index("--lora-modules") + 1] == "sql=/opt/llm-inference/lora/sql" and "--enable-lora" in args


def test_the_api_key_is_never_rendered(services):
    text = repr(vllm_deploy.compose(services, SETTINGS)) + repr(vllm_deploy.systemd_units(services, SETTINGS))
    assert "--api-key" not in text and "VLLM_API_KEY" not in text


def test_systemd_units_pin_the_gpus_and_run_vllm_serve(services):
    units = vllm_deploy.systemd_units(services, SETTINGS)
    assert sorted(units) == ["vllm-fast.service", "vllm-reasoning.service"]
    unit = units["vllm-reasoning.service"]
    assert dict(unit["environment"])["CUDA_VISIBLE_DEVICES"] == "2,3"
    argv = shlex.split(unit["exec_start"])
    assert argv[:3] == ["/opt/llm-inference/venv/bin/vllm", "serve", "casperhansen/deepseek-r1-distill-qwen-32b-awq"]
    assert flag(argv, "--host") == "127.0.0.1" and flag(argv, "--port") == "8003" and unit["user"] == "vllm"


@pytest.mark.parametrize("image", ["vllm/vllm-openai", "vllm/vllm-openai:latest", "registry:5000/vllm"])
def test_unpinned_images_are_refused(services, image):
    with pytest.raises(vllm_deploy.DeployError, match="needs a pinned tag"):
        vllm_deploy.compose(services, dict(SETTINGS, image=image))


def test_registry_port_and_digest_are_fine():
    assert vllm_deploy.check_image("registry:5000/vllm/vllm-openai:v0.11.0")
    assert vllm_deploy.check_image("vllm/vllm-openai@sha256:" + "a" * 64)


@pytest.mark.parametrize("ports, message", [([8001, 8001], "both use port 8001"), ([80, 8002], "port 80 must be"),
                                            ([None, 8002], "port None must be")])
def test_ports_must_be_distinct_and_unprivileged(services, ports, message):
    broken = [dict(s, port=p) for s, p in zip(services, ports, strict=True)]
    with pytest.raises(vllm_deploy.DeployError, match=message):
        vllm_deploy.compose(broken, SETTINGS)


# -- issue 20: settings checked before any change, names folded to one service, the systemd unit escaped ------
GOOD = {"vllm_models": [dict(MODELS[0], max_model_len=4096)], "vllm_bind_address": "127.0.0.1",
        "vllm_gpu_memory_utilization": 0.9, "vllm_start_period": 900, "vllm_health_timeout": 1800,
        "vllm_extra_env": {}, "vllm_image": "vllm/vllm-openai:v0.11.0", "vllm_dir": "/opt/llm-inference",
        "vllm_venv": "/opt/llm-inference/venv", "vllm_hf_home": "/opt/llm-inference/hf-cache",
        "vllm_cache_dir": "/opt/llm-inference/vllm-cache", "vllm_user": "vllm", "vllm_hf_endpoint": ""}


def model(**changes):
    return dict(GOOD, vllm_models=[dict(GOOD["vllm_models"][0], **changes)])


def test_good_settings_and_digit_strings_pass():
    assert vllm_deploy.check_settings(GOOD) == []
    assert vllm_deploy.check_settings(model(port="8001", max_model_len="4096", gpus=["0"])) == []
    assert vllm_deploy.check_settings(dict(GOOD, vllm_models=[])) == []


@pytest.mark.parametrize("settings, fragment", [
    (model(max_model_len="lots"), "vllm_models[0] (fast).max_model_len: 'lots' is not a whole number"),
    (model(max_model_len=0), "vllm_models[0] (fast).max_model_len: 0"),
    (model(port=70000), "vllm_models[0] (fast).port: 70000 is not a TCP port"),
    (model(port="http"), "vllm_models[0] (fast).port: 'http' is not a TCP port"),
    (model(port=True), "vllm_models[0] (fast).port: True"),
    (model(gpu_memory_utilization="most"), "vllm_models[0] (fast).gpu_memory_utilization: 'most'"),
    (model(gpus="0,1"), "vllm_models[0] (fast).gpus: '0,1'"),
    (model(gpus=[0, 0]), "lists a GPU twice"),
    (model(tensor_parallel_size="two"), "vllm_models[0] (fast).tensor_parallel_size: 'two'"),
    (model(enforce_eager="no"), "vllm_models[0] (fast).enforce_eager: 'no' must be true or false"),
    (model(architecture={"params_b": "8b"}), "vllm_models[0] (fast).architecture.params_b: '8b'"),
    (model(env={"BAD NAME": "x"}), "vllm_models[0] (fast).env: 'BAD NAME' is not an environment variable"),
    (model(extra_args="--enforce-eager --x"), "vllm_models[0] (fast).extra_args: must be a list"),
    (model(lora_modules=[{"name": "sql"}]), "vllm_models[0] (fast).lora_modules"),
    (model(name="fast model"), "vllm_models[0].name: 'fast model' is not a served model name"),
    (model(image="vllm/vllm-openai:latest"), "vllm_models[0] (fast).image:"),
    (dict(GOOD, vllm_models={"fast": {}}), "vllm_models: must be a list"),
    (dict(GOOD, vllm_models=["fast"]), "vllm_models[0]: must be a mapping"),
    (dict(GOOD, vllm_bind_address="gpu-a.lan"), "vllm_bind_address: 'gpu-a.lan' is not an IP address"),
    (dict(GOOD, vllm_gpu_memory_utilization=90), "vllm_gpu_memory_utilization: 90"),
    (dict(GOOD, vllm_start_period="15m"), "vllm_start_period: '15m' is not a whole number of seconds"),
    (dict(GOOD, vllm_extra_env={"A-B": 1}), "vllm_extra_env: 'A-B' is not an environment variable name"),
    (dict(GOOD, vllm_extra_env={"A": {"b": 1}}), "vllm_extra_env.A: must be a string or a number"),
    (dict(GOOD, vllm_venv="venv"), "vllm_venv: 'venv' is not an absolute path"),
    (dict(GOOD, vllm_dir="/opt/x\nExecStartPre=/bin/sh"), "vllm_dir:"),
    (dict(GOOD, vllm_user="root user"), "vllm_user: 'root user'"),
    (dict(GOOD, vllm_hf_endpoint="mirror.lan"), "vllm_hf_endpoint: 'mirror.lan' is not an http(s):// URL"),
])
def test_bad_settings_are_named(settings, fragment):
    problems = vllm_deploy.check_settings(settings)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("first, second", [("Fast", "fast"), ("a.b", "a-b"), ("org/model", "org:model"),
                                           ("fast_1", "fast.1")])
def test_names_that_fold_to_one_service_are_refused_naming_both(first, second):
    assert vllm_deploy.service_key(first) == vllm_deploy.service_key(second)  # the premise: they collide
    settings = dict(GOOD, vllm_models=[dict(MODELS[0], name=first, port=8001),
                                       dict(MODELS[0], name=second, port=8002)])
    problems = vllm_deploy.check_settings(settings)
    assert len(problems) == 1, problems
    assert "vllm_models[0] (%s)" % first in problems[0] and "vllm_models[1] (%s)" % second in problems[0]
    assert vllm_deploy.service_key(first) in problems[0]


def test_distinct_names_pass_and_a_shared_port_is_named():
    settings = dict(GOOD, vllm_models=[dict(MODELS[0], name="fast", port=8001),
                                       dict(MODELS[0], name="fast2", port="8001")])
    assert vllm_deploy.check_settings(settings) == [
        "vllm_models[1].port: 8001 is also the port of vllm_models[0] (fast)"]


def test_a_port_given_as_digits_is_rendered_as_that_port(services):
    as_text = [dict(s, port=str(s["port"])) for s in services]
    project = vllm_deploy.compose(as_text, SETTINGS)
    assert project["services"]["vllm-fast"]["ports"] == ["127.0.0.1:8001:8000"]


def systemd_words(line):
    """Reference reading of an ExecStart= line per systemd.service(5) "Command lines" (independent of the code
    under test): words split on blanks; double or single quotes only around a whole word; C escapes; "%%" is %
    (specifiers) and "$$" is $ (variable expansion); a lone "\\;" is ";"."""
    words, index = [], 0
    escapes = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", " ": " "}
    while index < len(line):
        if line[index] == " ":
            index += 1
            continue
        word, quote = [], None
        if line[index] in "\"'":
            quote = line[index]
            index += 1
        while index < len(line):
            char = line[index]
            if quote and char == quote:
                index += 1
                assert index == len(line) or line[index] == " ", "quote closed inside a word: %r" % line
                break
            if not quote and char == " ":
                break
            assert quote or char not in "\"'", "quote inside an unquoted word: %r" % line
            if char == "\\":
                nxt = line[index + 1]
                if nxt == "x":
                    word.append(chr(int(line[index + 2:index + 4], 16)))
                    index += 4
                    continue
                word.append(escapes.get(nxt, "\\" + nxt) if nxt != ";" else ";")
                index += 2
                continue
            if char in "%$":
                assert line[index + 1] == char, "lone %s in %r" % (char, line)
                index += 1
            word.append(char)
            index += 1
        else:
            assert not quote, "unterminated quote in %r" % line
        words.append("".join(word))
    return words


AWKWARD = ["two words", "it's", 'say "hi"', "100%", "$HOME", "${X}", "back\\slash", "tab\there", "line\nbreak",
           ";", "", "%n%%", "a'b\"c"]


def awkward_services(services):
    first = dict(services[0], extra_args=AWKWARD, revision="rev with space",
                 env={"QUOTED": 'say "hi" 100% $HOME \\ end', "NEWLINE": "a\nb"})
    return [first] + services[1:]


def test_every_exec_start_argument_reaches_vllm_unchanged(services):
    settings = dict(SETTINGS, venv="/opt/llm inference/venv")
    units = vllm_deploy.systemd_units(awkward_services(services), settings)
    unit = units["vllm-fast.service"]
    line = [x for x in unit["text"].splitlines() if x.startswith("ExecStart=")][0][len("ExecStart="):]
    argv = systemd_words(line)
    assert argv[:2] == ["/opt/llm inference/venv/bin/vllm", "serve"] and argv[-len(AWKWARD):] == AWKWARD
    assert flag(argv, "--revision") == "rev with space" and flag(argv, "--port") == "8001"


def test_environment_values_are_quoted_and_escaped(services):
    unit = vllm_deploy.systemd_units(awkward_services(services), SETTINGS)["vllm-fast.service"]
    env = {}
    for text in unit["text"].splitlines():
        if text.startswith("Environment="):
            (value,) = systemd_words(text[len("Environment="):].replace("$", "$$"))  # $ is literal there
            name, _sep, rest = value.partition("=")
            env[name] = rest
    assert env["QUOTED"] == 'say "hi" 100% $HOME \\ end' and env["NEWLINE"] == "a\nb"
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["HF_HUB_OFFLINE"] == "1"


def test_the_unit_fails_closed_without_its_env_file(services):
    text = vllm_deploy.systemd_units(services, SETTINGS)["vllm-fast.service"]["text"]
    lines = text.splitlines()
    assert "EnvironmentFile=%s" % SETTINGS["env_file"] in lines
    assert not [x for x in lines if x.startswith("EnvironmentFile=-")]


def test_a_control_character_in_a_unit_value_is_refused(services):
    with pytest.raises(vllm_deploy.DeployError, match="control character"):
        vllm_deploy.systemd_units(services, dict(SETTINGS, dir="/opt/x\nExecStartPre=/bin/true"))


def test_systemd_analyze_verifies_the_rendered_unit(services, tmp_path):
    import shutil
    import subprocess
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    venv = tmp_path / "v e n v"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    (venv / "bin" / "vllm").chmod(0o755)
    env_file = tmp_path / "vllm.env"
    env_file.write_text("VLLM_API_KEY=x\n")
    settings = dict(SETTINGS, venv=str(venv), env_file=str(env_file), dir=str(tmp_path), user="root")
    for name, unit in vllm_deploy.systemd_units(awkward_services(services), settings).items():
        path = tmp_path / name
        path.write_text(unit["text"])
        result = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    # The check can fail (it catches broken quoting; the meaning of each word is checked by systemd_words above).
    bad = tmp_path / "vllm-bad.service"
    bad.write_text("[Service]\nExecStart=/bin/true serve \"unterminated\n")
    result = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True, check=False)
    assert result.returncode != 0 or result.stderr.strip()


def test_the_seeds_lora_limits_block_size_chunked_prefill_and_nccl_switches_are_rendered():
    """Seed 000's `--max-loras 3 --max-lora-rank 16`, seed 001's NCCL_P2P_DISABLE=0 / NCCL_IB_DISABLE=1."""
    models = [dict(MODELS[1], max_loras=3, max_lora_rank=16, block_size=32, enable_chunked_prefill=False,
                   disable_custom_all_reduce=True, nccl_p2p_disable=False, nccl_ib_disable=True)]
    service = vllm_plan.plan(GPUS, models)["services"][0]
    args = vllm_deploy.vllm_args(service, 8000)
    assert (flag(args, "--max-loras"), flag(args, "--max-lora-rank"), flag(args, "--block-size")) == ("3", "16", "32")
    assert "--no-enable-chunked-prefill" in args and "--disable-custom-all-reduce" in args
    assert args.index("--max-loras") > args.index("--enable-lora")
    env = vllm_deploy.compose([service], SETTINGS)["services"]["vllm-reasoning"]["environment"]
    assert (env["NCCL_P2P_DISABLE"], env["NCCL_IB_DISABLE"]) == ("0", "1")
    unit = vllm_deploy.systemd_units([service], SETTINGS)["vllm-reasoning.service"]
    assert ("NCCL_IB_DISABLE", "1") in unit["environment"]
    plain = vllm_deploy.vllm_args(vllm_plan.plan(GPUS, [MODELS[0]])["services"][0], 8000)
    assert not {"--block-size", "--max-loras", "--disable-custom-all-reduce"} & set(plain)
    assert not [a for a in plain if "chunked" in a]


@pytest.mark.parametrize("changes, fragment", [
    ({"max_loras": 2}, "max_loras: only with lora_modules"),
    ({"max_lora_rank": 12, "lora_modules": [{"name": "a", "path": "/x"}]}, "max_lora_rank: 12 is not one of vLLM's"),
    ({"block_size": 24}, "block_size: 24 is not one of vLLM's values (1, 8, 16, 32, 64, 128)"),
    ({"enable_chunked_prefill": "yes"}, "enable_chunked_prefill: 'yes' must be true or false"),
    ({"nccl_p2p_disable": True, "disable_custom_all_reduce": False}, "which nccl_p2p_disable true turns off"),
    ({"max_loras": 0, "lora_modules": [{"name": "a", "path": "/x"}]}, "max_loras: 0 is not a whole number >= 1"),
])
def test_bad_vllm_switches_are_named(changes, fragment):
    problems = vllm_deploy.check_settings(model(**changes))
    assert any(fragment in p for p in problems), problems


# -- CPU models, local model directories, shutdown -------------------------------------------------------------
TINY = "/data/llm/models/llmstack-tiny"
TINY_FACTS = {TINY: {"architecture": {"layers": 2, "attention_heads": 4, "kv_heads": 2, "head_dim": 32,
                                      "hidden_size": 64, "vocab_size": 2048, "max_position": 1024,
                                      "params_b": 360768 / 1e9},
                     "torch_dtype": "bfloat16", "weight_bytes": 721536, "params": 360768, "quantization": None}}
CPU_MODEL = {"name": "fast", "model": TINY, "device": "cpu", "max_model_len": 1024, "port": 8001}


@pytest.fixture(scope="module")
def cpu_service():
    return vllm_plan.plan([], [CPU_MODEL], cpu_kvcache_space_gib=4, model_facts=TINY_FACTS)["services"][0]


def test_a_cpu_path_model_in_compose(cpu_service):
    settings = dict(SETTINGS, shutdown_timeout=30, version="0.32.0", image="localhost/llmstack-lab-vllm-cpu:0.32.0")
    definition = vllm_deploy.compose([cpu_service], settings)["services"]["vllm-fast"]
    assert "deploy" not in definition
    env = definition["environment"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4" and not [k for k in env if k.startswith(("CUDA", "NCCL"))]
    assert "%s:%s:ro" % (TINY, TINY) in definition["volumes"]
    args = definition["command"]
    assert flag(args, "--model") == TINY and flag(args, "--served-model-name") == "fast"
    assert "--gpu-memory-utilization" not in args and "--tensor-parallel-size" not in args
    assert flag(args, "--shutdown-timeout") == "30" and definition["stop_grace_period"] == "45s"
    assert definition["cap_add"] == ["SYS_NICE"]
    assert "/health" in " ".join(definition["healthcheck"]["test"])


def test_a_cpu_model_in_compose_runs_the_cpu_image_and_its_version_decides_the_drain(cpu_service):
    """vllm_image is a CUDA build (it does not start without a GPU): a cpu model without its own image gets
    vllm_cpu_image, whose tag also decides --shutdown-timeout (0.18+); a GPU model keeps vllm_image; a model's own
    image wins."""
    gpu = vllm_plan.plan(GPUS, [{"name": "big", "model": "meta-llama/Llama-3.1-8B-Instruct", "port": 8002}])[
        "services"][0]
    settings = dict(SETTINGS, shutdown_timeout=30, version="0.11.0", image="vllm/vllm-openai:v0.11.0",
                    cpu_image="public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.19.0")
    project = vllm_deploy.compose([cpu_service, gpu], settings)["services"]
    assert project["vllm-fast"]["image"] == "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.19.0"
    assert flag(project["vllm-fast"]["command"], "--shutdown-timeout") == "30"
    assert project["vllm-big"]["image"] == "vllm/vllm-openai:v0.11.0"
    assert "--shutdown-timeout" not in project["vllm-big"]["command"]  # 0.11.0 has no such flag
    own = dict(cpu_service, image="localhost/llmstack-lab-vllm-cpu:0.32.0")
    assert vllm_deploy.compose([own], settings)["services"]["vllm-fast"]["image"] == own["image"]


def test_a_cpu_path_model_as_a_systemd_unit(cpu_service):
    settings = dict(SETTINGS, shutdown_timeout=20, version="0.32.0")
    unit = vllm_deploy.systemd_units([cpu_service], settings)["vllm-fast.service"]
    env = dict(unit["environment"])
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4" and env["CUDA_VISIBLE_DEVICES"] == ""  # sees no GPU
    assert not [k for k in env if k.startswith("NCCL")]
    argv = shlex.split(unit["exec_start"])
    assert argv[2] == TINY and flag(argv, "--served-model-name") == "fast"
    assert "--gpu-memory-utilization" not in argv and "--tensor-parallel-size" not in argv
    assert flag(argv, "--shutdown-timeout") == "20"
    lines = unit["text"].splitlines()
    assert {"TimeoutStopSec=35", "KillSignal=SIGTERM", "KillMode=mixed"} <= set(lines)
    assert "on CPU" in unit["description"]


def test_gpu_services_keep_their_gpus_and_also_get_the_stop_timeouts(services):
    settings = dict(SETTINGS, shutdown_timeout=30, version="0.18.0")
    project = vllm_deploy.compose(services, settings)["services"]
    assert project["vllm-fast"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["0"]
    assert "cap_add" not in project["vllm-fast"] and "VLLM_CPU_KVCACHE_SPACE" not in project["vllm-fast"]["environment"]
    assert project["vllm-fast"]["stop_grace_period"] == "45s"
    unit = vllm_deploy.systemd_units(services, settings)["vllm-reasoning.service"]
    assert "TimeoutStopSec=45" in unit["text"].splitlines() and "KillMode=mixed" in unit["text"].splitlines()


@pytest.mark.parametrize("method, settings, expected", [
    ("compose", {"image": "vllm/vllm-openai:v0.11.0", "version": "0.32.0"}, None),     # the image runs, not pip's
    ("compose", {"image": "vllm/vllm-openai:v0.18.0", "version": "0.11.0"}, "30"),
    ("compose", {"image": "vllm/vllm-openai:v0.18.1-cu128", "version": "0.11.0"}, "30"),
    ("compose", {"image": "vllm/vllm-openai:nightly-2026", "version": "0.17.1"}, None),   # no version in the tag
    ("compose", {"image": "vllm/vllm-openai@sha256:" + "a" * 64, "version": "0.18.0"}, "30"),
    ("systemd", {"version": "0.11.0"}, None),
    ("systemd", {"version": "0.18.0"}, "30"),
    ("systemd", {"version": "0.32.0"}, "30"),
])
def test_shutdown_timeout_only_for_a_vllm_that_has_it(services, method, settings, expected):
    """--shutdown-timeout appeared in vLLM 0.18.0 (vllm-project/vllm#34730); older vLLMs refuse unknown flags."""
    merged = dict(SETTINGS, shutdown_timeout=30, **settings)
    if method == "compose":
        args = vllm_deploy.compose(services, merged)["services"]["vllm-fast"]["command"]
    else:
        args = vllm_deploy.systemd_units(services, merged)["vllm-fast.service"]["argv"]
    assert (flag(args, "--shutdown-timeout") if "--shutdown-timeout" in args else None) == expected
    warnings = vllm_deploy.render_warnings(services, merged, method)
    assert bool(warnings) == (expected is None)
    if warnings:
        assert "--shutdown-timeout" in warnings[0] and "0.18.0" in warnings[0] and "fast" in warnings[0]


def test_the_stop_timeout_waits_even_where_vllm_cannot_drain(services):
    project = vllm_deploy.compose(services, dict(SETTINGS, shutdown_timeout=0))["services"]
    assert project["vllm-fast"]["stop_grace_period"] == "15s"


def test_systemd_analyze_verifies_a_cpu_unit(cpu_service, tmp_path):
    import shutil
    import subprocess
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "vllm").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "vllm").chmod(0o755)
    env_file = tmp_path / "vllm.env"
    env_file.write_text("VLLM_API_KEY=x\n")
    settings = dict(SETTINGS, venv=str(tmp_path), env_file=str(env_file), dir=str(tmp_path), user="root",
                    shutdown_timeout=30, version="0.32.0")
    for name, unit in vllm_deploy.systemd_units([cpu_service], settings).items():
        path = tmp_path / name
        path.write_text(unit["text"])
        result = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


CPU_GOOD = dict(GOOD, vllm_models=[dict(CPU_MODEL)], vllm_device="gpu", vllm_cpu_kvcache_space_gib=4,
                vllm_shutdown_timeout=30, vllm_version="0.11.0")


def cpu_model(**changes):
    return dict(CPU_GOOD, vllm_models=[dict(CPU_GOOD["vllm_models"][0], **changes)])


def test_good_cpu_settings_pass():
    assert vllm_deploy.check_settings(CPU_GOOD) == []
    assert vllm_deploy.check_settings(cpu_model(device=None, dtype="float32", cpu_kvcache_space_gib="8")) != []
    assert vllm_deploy.check_settings(dict(cpu_model(device=None, dtype="float32", cpu_kvcache_space_gib="8"),
                                           vllm_device="cpu")) == []
    assert vllm_deploy.check_settings(model(dtype="bfloat16")) == []


@pytest.mark.parametrize("settings, fragment", [
    (cpu_model(gpus=[0]), "vllm_models[0] (fast).gpus: a cpu model (device cpu) runs on no GPU"),
    (dict(cpu_model(device=None, gpus=[0]), vllm_device="cpu"), "vllm_models[0] (fast).gpus: a cpu model"),
    (cpu_model(tensor_parallel_size=2), "vllm_models[0] (fast).tensor_parallel_size: a cpu model"),
    (cpu_model(gpu_memory_utilization=0.5), "vllm_models[0] (fast).gpu_memory_utilization: a cpu model"),
    (cpu_model(nccl_p2p_disable=True), "vllm_models[0] (fast).nccl_p2p_disable: a cpu model"),
    (cpu_model(device="tpu"), "vllm_models[0] (fast).device: 'tpu' is not gpu or cpu"),
    (cpu_model(cpu_kvcache_space_gib=0.5), "vllm_models[0] (fast).cpu_kvcache_space_gib: 0.5 is not a whole number"),
    (model(cpu_kvcache_space_gib=4), "vllm_models[0] (fast).cpu_kvcache_space_gib: only for a cpu model"),
    (cpu_model(dtype="half"), "vllm_models[0] (fast).dtype: 'half' is not one of float16, bfloat16, float32"),
    (cpu_model(model="/data/llm/models/a:b"), "vllm_models[0] (fast).model: '/data/llm/models/a:b'"),
    (cpu_model(model="models/tiny dir"), "vllm_models[0] (fast).model: 'models/tiny dir' is not a Hugging Face"),
    (cpu_model(revision="main"), "vllm_models[0] (fast).revision: a local model directory has no revision"),
    (dict(CPU_GOOD, vllm_device="npu"), "vllm_device: 'npu' is not gpu or cpu"),
    (dict(CPU_GOOD, vllm_cpu_kvcache_space_gib=0), "vllm_cpu_kvcache_space_gib: 0 is not a whole number of GiB"),
    (dict(CPU_GOOD, vllm_shutdown_timeout="30s"), "vllm_shutdown_timeout: '30s' is not a whole number of seconds"),
    (dict(CPU_GOOD, vllm_shutdown_timeout=-1), "vllm_shutdown_timeout: -1"),
    (dict(CPU_GOOD, vllm_version="latest"), "vllm_version: 'latest' is not a vLLM version"),
    (dict(CPU_GOOD, vllm_cpu_image="vllm/vllm-cpu"), "vllm_cpu_image: 'vllm/vllm-cpu' needs a pinned tag"),
])
def test_bad_cpu_and_path_settings_are_named(settings, fragment):
    problems = vllm_deploy.check_settings(settings)
    assert any(fragment in p for p in problems), problems


def test_a_unit_waits_for_the_file_system_of_its_weights(services):
    """The model disk is mounted with nofail (not required by local-fs.target): without RequiresMountsFor= a server
    could start on the empty mount point at boot and find no weights (offline) - the hf_home given, not a default."""
    units = vllm_deploy.systemd_units(services, dict(SETTINGS, hf_home="/data/llm/models/hf-cache"))
    for unit in units.values():
        unit_section = unit["text"].split("[Service]", 1)[0]
        assert "RequiresMountsFor=/data/llm/models/hf-cache\n" in unit_section, unit["text"]
