"""plansim.configfile: the one reader of YAML/JSON config files."""

from __future__ import annotations

import pytest

from plansim.configfile import read_config
from plansim.errors import ConfigError


def _file(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    assert read_config(_file(tmp_path, "d.yaml", b"\xef\xbb\xbfnum_workers: 2\n")) == {
        "num_workers": 2
    }
    assert read_config(_file(tmp_path, "d.json", b'\xef\xbb\xbf{"seed": 1}')) == {"seed": 1}


def test_bytes_that_are_not_utf8_name_the_line_and_column(tmp_path):
    path = _file(tmp_path, "d.yaml", b'seed: 1\nrouter: {mode: "\xff"}\n')
    with pytest.raises(ConfigError) as err:
        read_config(path)
    # "router: {mode: \"" is 16 bytes: the bad byte is column 17 of line 2
    assert str(err.value) == f"{path}:2: not UTF-8 text: byte 0xff at column 17"


def test_yaml_key_given_twice_is_an_error_at_its_second_line(tmp_path):
    path = _file(tmp_path, "d.yaml", b"num_workers: 2\nseed: 1\nnum_workers: 3\n")
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert str(err.value) == (
        f"{path}:3: num_workers: given twice in one mapping (first on line 1)"
    )


def test_nested_yaml_key_given_twice_is_an_error(tmp_path):
    path = _file(tmp_path, "d.yaml", b"engine:\n  block_size: 64\n  block_size: 32\n")
    with pytest.raises(ConfigError, match=r":3: block_size: given twice"):
        read_config(path)


def test_yaml_merge_key_may_be_overridden(tmp_path):
    text = b"base: &b {block_size: 64, max_num_seqs: 8}\nengine:\n  <<: *b\n  block_size: 32\n"
    assert read_config(_file(tmp_path, "d.yaml", text))["engine"] == {
        "block_size": 32,
        "max_num_seqs": 8,
    }


def test_json_key_given_twice_is_an_error(tmp_path):
    path = _file(tmp_path, "d.json", b'{"seed": 1, "seed": 2}')
    with pytest.raises(ConfigError, match=r"d.json: seed: given twice in one object"):
        read_config(path)


def test_syntax_error_names_the_line(tmp_path):
    path = _file(tmp_path, "d.yaml", b"seed: 1\nrouter: [1, 2\n")
    with pytest.raises(ConfigError, match=r"d.yaml:3: invalid YAML"):
        read_config(path)


def test_top_level_must_be_a_mapping_and_empty_is_empty(tmp_path):
    with pytest.raises(ConfigError, match="must be a mapping at the top level, not a list"):
        read_config(_file(tmp_path, "d.yaml", b"- 1\n- 2\n"), what="deployment file")
    assert read_config(_file(tmp_path, "e.yaml", b"")) == {}


def test_unreadable_file_names_its_role(tmp_path):
    with pytest.raises(ConfigError, match="cannot read planner config: Is a directory"):
        read_config(tmp_path, what="planner config")


def test_an_error_gets_the_line_of_its_key(tmp_path):
    from plansim.configfile import locate

    path = tmp_path / "d.yaml"
    path.write_text(
        "num_workers: 2\nrouter:\n  mode: kv_router\n  overlap_scor_weight: 1\n"
        "planner:\n  kalman_r: 3\n"
    )
    found = locate(ConfigError("unknown key", source=str(path), field="router.overlap_scor_weight"))
    assert str(found) == f"{path}:4: router.overlap_scor_weight: unknown key"
    # A planner config's field, named from the planner block's top, is found inside the file.
    assert locate(ConfigError("bad", source=str(path), field="kalman_r")).line == 6
    # JSON too; a key that is not in the file (a flag's) and an error with a line stay as they are.
    json_path = tmp_path / "a.json"
    json_path.write_text('{\n  "engine": {\n    "block_size": 0\n  }\n}')
    assert locate(ConfigError("x", source=str(json_path), field="engine.block_size")).line == 3
    absent = ConfigError("x", source=str(path), field="seed")
    assert locate(absent) is absent
    given = ConfigError("x", source=str(path), line=1, field="router.mode")
    assert locate(given) is given


def test_a_nul_character_in_a_key_or_text_names_its_field(tmp_path):
    # YAML's "\0" and JSON's "\u0000" both put one in; a path holding one cannot be opened.
    path = _file(tmp_path, "d.yaml", b'engine: "args\\0.json"\n')
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert str(err.value) == f"{path}: engine: a NUL character in a text"
    path = _file(tmp_path, "d.json", b'{"engine": {"ok": ["a", "b\\u0000"], "k\\u0000": 1}}')
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert str(err.value) == f"{path}: engine.ok[1]: a NUL character in a text"
    path = _file(tmp_path, "k.json", b'{"engine": {"k\\u0000": 1}}')
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert str(err.value) == f"{path}: engine.k\\0: a NUL character in a text"
