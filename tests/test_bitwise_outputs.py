"""tools/bitwise_outputs.py --compare on saved results (no GPU): the same bits pass, a signed zero
against an unsigned one passes as the same value but is reported, and any other difference in a
live output row, in the NaN rows of padding sequences or in the state fails the comparison."""
import torch


def _results(out_zero=0.0, out_value=1.5, nan_row=2, state_value=0.25):
    out = torch.arange(4 * 3 * 8, dtype=torch.float32).reshape(4, 3, 8).to(torch.bfloat16)
    out[0, 0, 0] = out_zero
    out[1, 2, 3] = out_value
    out[nan_row] = float("nan")                  # a padding sequence's rows: never written
    state = torch.full((2, 3, 4, 4), 0.5)
    state[1, 2, 3, 1] = state_value
    return {"case/solo": (out, state)}


def _compare(repo_script, tmp_path, a, b, capsys):
    tool = repo_script("tools/bitwise_outputs.py")
    pa, pb = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(a, pa)
    torch.save(b, pb)
    rc = tool.compare(str(pa), str(pb))
    return rc, capsys.readouterr().out


def test_same_bits_pass(repo_script, tmp_path, capsys):
    rc, text = _compare(repo_script, tmp_path, _results(), _results(), capsys)
    assert rc == 0
    assert "bits same  values same" in text and "1 of 1 results have the same values" in text


def test_signed_zero_is_the_same_value_but_reported(repo_script, tmp_path, capsys):
    rc, text = _compare(repo_script, tmp_path, _results(out_zero=0.0), _results(out_zero=-0.0), capsys)
    assert rc == 0
    assert "bits DIFFER  values same" in text


def test_a_changed_output_fails(repo_script, tmp_path, capsys):
    rc, text = _compare(repo_script, tmp_path, _results(), _results(out_value=1.515625), capsys)
    assert rc == 1
    assert "values DIFFER" in text and "0 of 1 results have the same values" in text


def test_a_written_padding_row_fails(repo_script, tmp_path, capsys):
    rc, text = _compare(repo_script, tmp_path, _results(nan_row=2), _results(nan_row=3), capsys)
    assert rc == 1


def test_a_changed_state_fails(repo_script, tmp_path, capsys):
    rc, text = _compare(repo_script, tmp_path, _results(), _results(state_value=0.2500001), capsys)
    assert rc == 1
    assert "values DIFFER" in text
