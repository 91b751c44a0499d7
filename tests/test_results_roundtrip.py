"""Whatever a model writes survives the results file: arbitrary text in the text columns (and the identity) comes back
from `write_results` / `read_results` as written, and every committed results file is rewritten byte for byte."""
import gzip, os, tempfile
from pathlib import Path
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from wordbench.evaluate.results import CORE_COLUMNS, ResultSchema, read_results, results_dir, write_results

# the same 200 examples in every run; FUZZ_EXAMPLES=N draws N fresh ones instead
EXAMPLES = settings(max_examples=int(os.environ.get('FUZZ_EXAMPLES', 200)), deadline=None,
                    derandomize=not os.environ.get('FUZZ_EXAMPLES'),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCHEMA = ResultSchema(CORE_COLUMNS + ('reply',), key=('model', 'strategy', 'shots', 'seed', 'id'),
                      dtypes={'pred': 'Int64', 'correct': 'Int64', 'failed': bool, 'shots': int, 'seed': int},
                      text=('id', 'model', 'label', 'reply'))
TEXT_COLUMNS = ('id', 'model', 'label', 'reply', 'identity')

# any code point but a surrogate, with the characters CSV and pandas treat specially drawn often
CHARS = st.one_of(st.characters(exclude_categories=('Cs',)),
                  st.sampled_from('\r\n\x00",\t \x1b\x0b\x0c\x1c\x85\u2028\ufeff\ufffd#'))
TEXT = st.one_of(st.text(CHARS, max_size=40),
                 st.sampled_from(['', ' ', 'NA', 'nan', 'NaN', 'None', 'null', 'True', '1e5', '007', ' 1 ', '"',
                                  '\r', '\r\n', '\n', '\x00']))
ROW = st.fixed_dictionaries({c: TEXT for c in TEXT_COLUMNS} | {
    'pred': st.one_of(st.none(), st.integers(-3, 3)), 'failed': st.booleans()})


def _frame(rows: list[dict]) -> pd.DataFrame:
    pred = pd.array([r['pred'] for r in rows], dtype='Int64')
    return pd.DataFrame({c: [r[c] for r in rows] for c in (*TEXT_COLUMNS, 'failed')}).assign(
        task='toy', strategy='s', shots=0, seed=0, pred=pred, correct=pred)


def _cells(df: pd.DataFrame) -> list[tuple]:
    "The rows as tuples of Python values, in a canonical order (ties in the key keep no order of their own)."
    cols = [*TEXT_COLUMNS, 'pred', 'failed']
    rows = df[cols].astype(object).itertuples(index=False)
    return sorted((tuple(None if pd.isna(v) else v for v in r) for r in rows), key=repr)


@EXAMPLES
@given(st.lists(ROW, min_size=1, max_size=6))
def test_any_text_round_trips(rows):
    df = _frame(rows)
    with tempfile.TemporaryDirectory() as d:
        back = read_results(write_results(df, Path(d)/'toy_m.csv.gz', SCHEMA), SCHEMA)
    assert _cells(back) == _cells(df)


def _second_row_start(p: Path) -> int:
    return gzip.decompress(p.read_bytes()).index(b'\n    toy') + 1


def test_leading_blanks_at_the_read_buffer_end(tmp_path):
    "A row whose first field starts with blanks that straddle the end of pandas' 256 KiB read buffer keeps them."
    rows = _frame([dict(id=str(i), model='m', label='A', reply='x', identity='i', pred=1, failed=False)
                   for i in range(2)]).assign(task=['toy', '    toy'])
    p = write_results(rows, tmp_path/'toy_m.csv.gz', SCHEMA)
    rows.loc[0, 'reply'] = 'x' * (262_142 - _second_row_start(p))   # its blanks: bytes 262141-262144
    write_results(rows, p, SCHEMA)
    assert _second_row_start(p) == 262_141
    assert read_results(p, SCHEMA).task.tolist() == ['toy', '    toy']


def _committed() -> list[Path]:
    return sorted(results_dir().rglob('*.csv.gz'))


def test_there_are_committed_results():
    assert len(_committed()) >= 20


@pytest.mark.parametrize('path', _committed(), ids=lambda p: p.name)
def test_committed_results_rewrite_byte_for_byte(path, tmp_path):
    "A committed results file read with its task's schema and written again gives the same bytes."
    from wordbench.systems import load_systems
    from wordbench.evaluate.tasks import TASKS
    load_systems()
    names = [n for n in TASKS if path.name.startswith(f'{n}_')]
    assert names, f'no registered task writes {path.name}'
    schema = TASKS[max(names, key=len)].schema
    assert write_results(read_results(path, schema), tmp_path/path.name, schema).read_bytes() == path.read_bytes()
