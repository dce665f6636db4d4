"""Prompt modules: the texts follow their decisions, the engine extracts and resolves strictly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from veriharness._util.hashing import sha256_bytes, sha256_file
from veriharness.experiment.catalog import load_catalog
from veriharness.experiment.config import load_condition
from veriharness.experiment.environment import NETWORK_VALUES, EnvironmentFacts
from veriharness.experiment.prompts import (
    REFERENCE_IMAGE_PATH,
    SEPARATOR,
    PromptError,
    assemble,
    load_module,
    resolve_module,
)
from veriharness.experiment.taxonomy import load_taxonomy
from veriharness.experiment.tool_contract import CallRequest

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "prompts"
B1, B2, B3 = "b1-callmllm-v0.1", "b2-image-to-code-v0.1", "b3-verification-v0.2"
B3_V01, ENV = "b3-verification-v0.1", "env-facts-v0.1"
CATALOG = load_catalog(ROOT / "config" / "model-catalog.offline.yaml")
FACTS = EnvironmentFacts(
    chromium="/usr/bin/chromium", viewport_width=1280, viewport_height=800, network="none"
)
VALUES = {
    "MODEL_PROFILE_CATALOG": CATALOG.public_text(),
    "REFERENCE_IMAGE_PATH": REFERENCE_IMAGE_PATH,
    **FACTS.values(),
}
CODE = re.compile(r"\b[A-HZ][0-9]\b")
# Words that would frame CallMLLM as a checking mechanism (D-0005).
VERIFICATION_WORDS = re.compile(
    r"\b(verif\w*|validat\w*|accept\w*|gates?|gating|scor\w*|stop\w*|threshold\w*|pass(es|ed)?|"
    r"fail(s|ed)?|approv\w*|check\w*|correct\w*|good enough|done)\b",
    re.IGNORECASE,
)


def _block(module_id: str) -> str:
    return load_module(PROMPTS, module_id).template


def _write(tmp_path: Path, name: str, body: str, placeholder: str | None = "X") -> Path:
    header = f"---\nid: {name}\nslot: B1\nversion: '0'\nplaceholder: {placeholder or 'null'}\n---\n"
    path = tmp_path / f"{name}.md"
    path.write_text(header + body)
    return path


def test_b1_declares_every_taxonomy_code_and_no_other() -> None:
    taxonomy = load_taxonomy(ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml")
    assert set(CODE.findall(_block(B1))) == set(taxonomy.codes)


def test_b1_names_the_tool_and_never_frames_it_as_verification() -> None:
    block = _block(B1)
    assert block.startswith("<multimodal_model_tool_policy>")
    assert block.rstrip().endswith("</multimodal_model_tool_policy>")
    assert "`mcp__mllm__call`, referred to in this policy as `CallMLLM`" in block
    assert block.count("{{MODEL_PROFILE_CATALOG}}") == 1
    assert VERIFICATION_WORDS.findall(block) == []


def test_b1_examples_are_complete_valid_requests() -> None:
    taxonomy = load_taxonomy(ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml")
    examples = re.findall(r"<example>\n[^\n]*\n(.*?)\n</example>", _block(B1), re.DOTALL)
    assert len(examples) >= 4
    for text in examples:
        request = json.loads(text)
        assert set(request) <= {
            "instruction",
            "inputs",
            "capability_tags",
            "output",
            "model_profile",
        }
        assert len(request["instruction"]) > 80
        assert request["capability_tags"] and not taxonomy.unknown(request["capability_tags"])
        labels = [item["label"] for item in request["inputs"]]
        assert len(labels) == len(set(labels))
        for item in request["inputs"]:
            assert item["kind"] in ("text", "image")
            if "region" in item:
                assert set(item["region"]) == {"x", "y", "width", "height"}
        assert request["output"]["kind"] in ("text", "json")
        assert "schema" not in request["output"] or request["output"]["kind"] == "json"
        # The frozen B1 text must never show a request the server refuses (e.g. D-0002: no
        # example without an image input).
        CallRequest.model_validate(request, context={"taxonomy_codes": taxonomy.codes})


def test_b2_has_task_parts_and_no_legacy_tools_or_playbook() -> None:
    block = _block(B2)
    assert block.count("{{REFERENCE_IMAGE_PATH}}") == 1
    for heading in (
        "Task objective",
        "Live and editable artifact",
        "Layout and content layering",
        "Typography and visual fidelity",
    ):
        assert f"## {heading}" in block
    for rule in ("answer.html", "assets/", "network", "absolute", "background"):
        assert rule in block
    assert not re.search(r"\b(grep|inspect|align|diff|inpaint\w*)\b", block, re.IGNORECASE)
    assert not re.search(r"^\s*\d+[.)]\s", block, re.MULTILINE)
    assert VERIFICATION_WORDS.findall(block) == []


def test_b2_review_translation_is_section_aligned_and_never_sent() -> None:
    english, chinese = _block(B2), load_module(PROMPTS, f"{B2}.zh").template
    assert len(re.findall(r"^## ", chinese, re.M)) == len(re.findall(r"^## ", english, re.M))
    assert len(re.findall(r"^- ", chinese, re.M)) == len(re.findall(r"^- ", english, re.M))
    assert "{{REFERENCE_IMAGE_PATH}}" in chinese
    with pytest.raises(PromptError, match="review file and is never part of a session prompt"):
        assemble(PROMPTS, [B1, f"{B2}.zh"], VALUES)


def test_b3_v01_is_a_verification_policy_using_only_runtime_means() -> None:
    block = _block(B3_V01)
    assert "<verification_policy>" in block and "</verification_policy>" in block
    assert "chromium --headless --no-sandbox" in block and "--screenshot=" in block
    assert "CallMLLM" in block
    assert load_module(PROMPTS, B3_V01).header.placeholder is None


def test_b3_v02_is_the_same_policy_without_the_browser_command() -> None:
    old, new = _block(B3_V01), _block(B3)
    assert "<verification_policy>" in new and "</verification_policy>" in new
    assert not re.search(r"chromium|--screenshot|--window-size", new, re.IGNORECASE)
    # Only the part on how to see the page changed; the policy's sections are v0.1's.
    assert re.findall(r"^## .*", new, re.M) == re.findall(r"^## .*", old, re.M)
    assert (
        new.split("## Comparing with the reference")[1]
        == (old.split("## Comparing with the reference")[1])
    )
    assert load_module(PROMPTS, B3).header.placeholder is None


def test_the_environment_facts_state_facts_only() -> None:
    module = load_module(PROMPTS, ENV)
    block = module.template
    assert module.header.slot == "env"
    assert block.startswith("<environment_facts>")
    assert block.rstrip().endswith("</environment_facts>")
    assert set(module.header.placeholders) == set(FACTS.values())
    assert VERIFICATION_WORDS.findall(block) == []
    assert not re.search(r"\b(compare|fix|before you|after|then|first|should|must)\b", block, re.I)
    assert not re.search(r"^\s*\d+[.)]\s", block, re.MULTILINE)  # no numbered steps
    text = resolve_module(module, VALUES).text
    command = (
        "/usr/bin/chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
        '--window-size=1280,800 --screenshot=page.png "file://$PWD/answer.html"'
    )
    assert command in text.splitlines()[-3]
    assert f"Network access: {NETWORK_VALUES['none']}." in text


def test_each_value_of_several_placeholders_is_recorded() -> None:
    resolved = resolve_module(load_module(PROMPTS, ENV), VALUES)
    assert resolved.placeholder == ("CHROMIUM", "VIEWPORT_WIDTH", "VIEWPORT_HEIGHT", "NETWORK")
    assert resolved.value == FACTS.values()
    single = resolve_module(load_module(PROMPTS, B2), VALUES)
    assert (single.placeholder, single.value) == ("REFERENCE_IMAGE_PATH", REFERENCE_IMAGE_PATH)


def test_assembled_prompts_differ_by_exactly_the_b3_block() -> None:
    absent_modules = load_condition(ROOT / "conditions", "b3-absent").modules
    present_modules = load_condition(ROOT / "conditions", "b3-present").modules
    assert ENV in absent_modules and B3 in present_modules
    absent = assemble(PROMPTS, absent_modules, VALUES)
    present = assemble(PROMPTS, [B3, *absent_modules], VALUES)  # listing order does not matter
    assert present == assemble(PROMPTS, present_modules, VALUES)
    assert [m.id for m in present.modules] == [B1, B2, ENV, B3]
    assert present.text == absent.text.rstrip("\n") + SEPARATOR + _block(B3) + "\n"
    assert "{{" not in present.text
    assert f"`{REFERENCE_IMAGE_PATH}`" in present.text
    assert CATALOG.public_text() in present.text
    # The catalog's private part never reaches the prompt.
    for secret in (CATALOG.profiles[0].provider.model, "VERIHARNESS_OFFLINE_URL", "/v1"):
        assert secret not in present.text


def test_digests_cover_source_template_and_resolved_text() -> None:
    module = load_module(PROMPTS, B1)
    resolved = resolve_module(module, VALUES)
    assert module.source_sha256 == sha256_file(PROMPTS / f"{B1}.md")
    assert module.template_sha256 == sha256_bytes(module.template.encode())
    assert resolved.resolved_sha256 == sha256_bytes(resolved.text.encode())
    assert resolved.resolved_sha256 != module.template_sha256
    b3 = resolve_module(load_module(PROMPTS, B3), VALUES)
    assert b3.resolved_sha256 == b3.template_sha256
    facts = resolve_module(load_module(PROMPTS, ENV), VALUES)
    assert facts.resolved_sha256 == sha256_bytes(facts.text.encode())
    assert facts.resolved_sha256 != facts.template_sha256


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("no fence at all\n", "expected exactly one fenced block, found 0"),
        ("```text\n{{X}}\n```\n\n```\nmore\n```\n", "expected exactly one fenced block, found 2"),
        ("```text\n{{X}}\n", "is never closed"),
    ],
)
def test_block_count_errors_name_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, "m", body)
    with pytest.raises(PromptError) as caught:
        load_module(tmp_path, "m")
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_longer_fence_may_contain_a_shorter_one(tmp_path: Path) -> None:
    _write(tmp_path, "m", "````text\nsee ```x``` and {{X}}\n```\ninner\n```\n````\n")
    module = load_module(tmp_path, "m")
    assert resolve_module(module, {"X": "v"}).text == "see ```x``` and v\n```\ninner\n```"


def test_only_the_declared_placeholder_is_replaced(tmp_path: Path) -> None:
    _write(tmp_path, "m", "```text\n{{X}} and {{Y}}\n```\n")
    with pytest.raises(PromptError, match=r"unresolved placeholder\(s\) \['\{\{Y\}\}'\]"):
        resolve_module(load_module(tmp_path, "m"), {"X": "a", "Y": "b"})
    _write(tmp_path, "n", "```text\nno token here\n```\n")
    with pytest.raises(PromptError, match=r"declared placeholder \{\{X\}\} does not occur"):
        resolve_module(load_module(tmp_path, "n"), {"X": "a"})
    _write(tmp_path, "o", "```text\n{{X}}\n```\n")
    with pytest.raises(PromptError, match="no value supplied"):
        resolve_module(load_module(tmp_path, "o"), {})


def test_header_id_must_match_the_file_stem(tmp_path: Path) -> None:
    path = _write(tmp_path, "m", "```text\n{{X}}\n```\n")
    path.rename(tmp_path / "other.md")
    with pytest.raises(PromptError, match="differs from the file stem 'other'"):
        load_module(tmp_path, "other")
    with pytest.raises(PromptError, match="no file"):
        load_module(tmp_path, "missing")


def test_two_modules_in_one_slot_are_refused() -> None:
    with pytest.raises(PromptError, match=r"slot\(s\) \['B1'\]"):
        assemble(PROMPTS, [B1, B1], VALUES)


# The sent block of every released prompt version. A version is frozen once released (spec
# D-0014/D-0018): a change to what Claude receives needs a new version file, never an edit of
# these. Commentary outside the fence may change; it is not sent and not in these hashes.
FROZEN_BLOCKS = {
    "b1-callmllm-v0.1": "sha256:65a717a23c251781db11a2dc72d810013d850759480967417c2124d1382a5660",
    "b2-image-to-code-v0.1": (
        "sha256:501a3cb01c0e4121a2db9ebd4146fd0af54afc337602641455ccc6c84d9a2e95"
    ),
    "b2-image-to-code-interactive-v0.1": (
        "sha256:2ff15d2f3b8166d57862ba659f64be70841acda4c02ea85a26fe58bc6c80d878"
    ),
    "b3-verification-v0.1": (
        "sha256:d3c9757a2bde81755f070a1df7c8fd5094d738bbd0a8aa1a3fca668c64eb7e74"
    ),
    "b3-verification-v0.2": (
        "sha256:f9abd467a4ccb008238463d196477c05cc96c2ddb74d641590935a55388a49d0"
    ),
    "env-facts-v0.1": "sha256:cd2a53c8ab08330f8ae4c13b238109c67ca66d5279a655b71e6ce138ae0ecafa",
    "annotator-v0.1": "sha256:0d1ac1786e497d8e1f06f8c1b5329090ef4a3080bb0b05e4c14d1761c85589ed",
}


@pytest.mark.parametrize("module_id", sorted(FROZEN_BLOCKS))
def test_released_prompt_versions_are_frozen(module_id: str) -> None:
    assert load_module(ROOT / "prompts", module_id).template_sha256 == FROZEN_BLOCKS[module_id]


def test_every_prompt_version_in_the_repository_is_frozen_here() -> None:
    modules = [
        *(ROOT / "prompts").glob("b*-v*.md"),
        *(ROOT / "prompts").glob("annotator-v*.md"),
        *(ROOT / "prompts").glob("env-facts-v*.md"),
    ]
    released = {p.stem for p in modules if not p.stem.endswith(".zh")}
    assert released == set(FROZEN_BLOCKS)


def test_the_annotator_prompt_lists_every_taxonomy_code_and_is_never_a_session_prompt() -> None:
    from veriharness.annotate.identity import taxonomy_text

    taxonomy = load_taxonomy(ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml")
    module = load_module(PROMPTS, "annotator-v0.1")
    resolved = resolve_module(module, {"TAXONOMY": taxonomy_text(taxonomy)})
    assert set(CODE.findall(resolved.text)) == set(taxonomy.codes)
    assert "declared" not in resolved.text.lower()  # it never sees the agent's own tags
    with pytest.raises(PromptError, match="never part of a session prompt"):
        assemble(PROMPTS, [B1, B2, "annotator-v0.1"], VALUES)
