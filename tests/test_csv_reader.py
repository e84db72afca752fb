"""``io.read_column`` reads a CSV file exactly or stops with a one-line error naming the line.

n is published exactly, so the reader must never skip, pad or cut a line: every case below was
once read silently with another n or other values (issues 14 and 18).
"""

import bz2
import csv
import gzip
import io

import numpy as np
import pytest

from pymc_dp.curator.data_files import InputFileError, read_column


def _write(tmp_path, body, name="data.csv"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _error(path, column="v") -> str:
    with pytest.raises(InputFileError) as info:
        read_column(path, column)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("v\n1\n\n0\n", 3),
        ("v\n1\n   \n0\n", 3),
        ("v\n1\n\t\n0\n", 3),
        ("v\n1\n0\n\n", 4),  # a trailing blank line is a line too
        ("a,v\n1,2\n,\n3,4\n", 3),  # a line of empty fields
        ("a,v\n1,2\n , \n3,4\n", 3),
    ],
    ids=["blank", "spaces", "tab", "trailing", "empty-fields", "blank-fields"],
)
def test_blank_lines_stop_the_release(tmp_path, body, line):
    message = _error(_write(tmp_path, body))
    assert f"line {line} is blank" in message and "stopped" in message


@pytest.mark.parametrize(
    ("body", "column", "expected"),
    [
        ("visits\n1,000\n2,000\n3,000\n", "visits", "line 2 has 2 field(s) but the header has 1"),
        ("a,b\n1,2,3\n4,5,6\n", "b", "line 2 has 3 field(s) but the header has 2"),
        ("a,b\n1,2\n3\n", "b", "line 3 has 1 field(s) but the header has 2"),
        ("a,b\n1,2\n3,4\n5;6\n", "a", "line 4 has 1 field(s) but the header has 2"),
    ],
    ids=["thousands-separator", "extra-field", "missing-field", "other-separator"],
)
def test_lines_with_the_wrong_number_of_fields_stop_the_release(tmp_path, body, column, expected):
    message = _error(_write(tmp_path, body), column)
    assert expected in message and "thousands separator" in message


def test_a_semicolon_separated_file_is_named_as_such(tmp_path):
    message = _error(_write(tmp_path, "a;v\n1;2\n"))
    assert "no column 'v'" in message and "';'" in message and "comma-separated" in message


def test_quoted_thousands_are_one_field_but_not_a_number(tmp_path):
    message = _error(_write(tmp_path, 'v\n"1,000"\n2\n'))
    assert "must hold plain numbers" in message and "line 2" in message
    assert "1,000" not in message


@pytest.mark.parametrize("text", ["1_000", "0x10", "12 kg", "1.2.3", "--1", "many"])
def test_values_that_python_or_pandas_might_accept_are_refused(tmp_path, text):
    message = _error(_write(tmp_path, f"v\n1\n2\n{text}\n"))
    assert "must hold plain numbers" in message and "line 4" in message
    assert text not in message.split(":", 1)[1]  # no record value after the file name


def test_missing_values_are_named_by_file_line_without_advice_to_drop(tmp_path):
    message = _error(_write(tmp_path, "id,v\n0,1\n1,\n2,2\n3,NaN\n4, NA \n"))
    assert "3 missing value(s), at data rows 2, 4, 5 (file lines 3, 5, 6)" in message
    assert "count n" not in message and "drop or fill" not in message
    assert "stopped" in message


def test_infinite_and_overflowing_values_are_refused(tmp_path):
    message = _error(_write(tmp_path, "v\n1\ninf\n1e400\n"))
    assert "infinite" in message and "lines 3, 4" in message


def test_duplicate_column_names_are_refused(tmp_path):
    message = _error(_write(tmp_path, "v,v\n1,2\n"))
    assert "names column 'v' 2 times" in message


def test_blank_header_and_empty_file(tmp_path):
    assert "line 1 is blank" in _error(_write(tmp_path, "\nv\n1\n"))
    assert "the file is empty" in _error(_write(tmp_path, ""))
    assert "has no records" in _error(_write(tmp_path, "v\n"))


def test_unterminated_quote_names_the_line(tmp_path):
    message = _error(_write(tmp_path, 'v\n1\n"2\n'))
    assert "not a readable CSV file at line 3" in message


def test_exact_files_are_read_exactly(tmp_path):
    body = 'id,v,note\n1,3,"a, b"\n2, -0.5e1 ,x\n3,TRUE,\n4,.25,"two\nlines"\n5,+7.,z\n'
    values = read_column(_write(tmp_path, body), "v")
    np.testing.assert_array_equal(values, [3.0, -5.0, 1.0, 0.25, 7.0])


def test_a_byte_order_mark_and_crlf_line_ends_are_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffv\r\n1\r\n2\r\n".encode())
    np.testing.assert_array_equal(read_column(path, "v"), [1.0, 2.0])


@pytest.mark.parametrize(("suffix", "opener"), [(".csv.gz", gzip.open), (".csv.bz2", bz2.open)])
def test_compressed_files_are_read_as_strictly(tmp_path, suffix, opener):
    path = tmp_path / f"data{suffix}"
    with opener(path, "wt") as handle:
        handle.write("v\n1\n2\n")
    np.testing.assert_array_equal(read_column(path, "v"), [1.0, 2.0])
    with opener(path, "wt") as handle:
        handle.write("v\n1\n\n2\n")
    assert "line 3 is blank" in _error(path)


def test_a_binary_file_is_refused(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"v\n\xff\xfe\x00\n")
    assert "not a UTF-8 text file" in _error(path)


def _random_file(rng: np.random.Generator) -> tuple[str, np.ndarray, int, int]:
    """A random well-formed CSV file: (text, records of column "v", number of columns, n)."""
    n, width = int(rng.integers(1, 30)), int(rng.integers(1, 5))
    where = int(rng.integers(width))
    names = [f"c{j}" for j in range(width)]
    names[where] = "v"
    records = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, size=n)
    records[rng.random(n) < 0.2] = 0.0
    lines = [",".join(names)]
    for value in records:
        text = str(rng.choice([repr(float(value)), f"{value:.17e}", f"{value:.17g}"]))
        fields = [str(rng.choice(["x", '"a, b"', "", "7"])) for _ in range(width)]
        fields[where] = f'"{text}"' if rng.random() < 0.3 else f" {text} "
        lines.append(",".join(fields))
    ending = str(rng.choice(["\n", "\r\n"]))
    return ending.join(lines) + ending, records, width, n


def test_random_files_are_read_exactly_and_every_defect_is_named_by_its_line(tmp_path):
    """300 random files (seeded): read back bit for bit; then one defect (a blank line, an extra
    or a missing field) at a random line must stop the reading naming exactly that line."""
    rng = np.random.default_rng(18)
    path = tmp_path / "data.csv"
    for _ in range(300):
        text, records, width, n = _random_file(rng)
        path.write_bytes(text.encode())
        np.testing.assert_array_equal(read_column(path, "v"), records)
        lines = text.splitlines(keepends=True)
        line = int(rng.integers(2, n + 3))  # 1-based file line; n + 2 appends after the last
        defect = rng.choice(["blank", "extra", "missing"] if width > 1 else ["blank", "extra"])
        if defect == "blank":
            lines.insert(line - 1, str(rng.choice(["\n", "  \n", "\t\n"])))
            expected = f"line {line} is blank"
        else:
            line = min(line, n + 1)
            (fields,) = csv.reader([lines[line - 1]])
            fields = [*fields, "9"] if defect == "extra" else fields[:-1]
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\n").writerow(fields)
            lines[line - 1] = buffer.getvalue()
            expected = f"line {line} has {len(fields)} field(s) but the header has {width}"
            if not any(field.strip() for field in fields):
                expected = f"line {line} is blank"  # only empty fields left: a blank line
        path.write_bytes("".join(lines).encode())
        with pytest.raises(InputFileError) as info:
            read_column(path, "v")
        assert expected in str(info.value), (text, defect, line, str(info.value))
