"""Every committed accuracy table in `figures/` prints an interval and a trivial baseline beside its accuracy.

The rule reads only a table's column names (tokens: the lower-cased name split at anything not a letter, digit or %):
- an *accuracy column* has a token `acc`, `accuracy` or `bacc`, or ends in a top-k token (`top5`, `top-5`: the
  probes' top-k accuracy), or ends in `N-shot` (WinoDict's cells), or is one of NewTerm's task columns `COMA`,
  `COST`, `CSJ`, `Avg.`;
- an *interval column* has a token `ci`, `lo` or `hi`, or holds `95%`; a table that reproduces a paper's table may
  instead carry a note line right under it saying its numbers have `no interval` (the paper reports none);
- a *baseline* is a column with a token `chance`, `majority`, `baseline`, `frequent`, `uniform` or `neither`, or a
  row whose first cells name one of them (NewTerm's `chance` / `majority` rows, the probes' most frequent targets).

Skipped: `figures/models/` (the report cards: tests/test_report_card.py), `figures/README.md` (an index that repeats
other files' headline tables) and the files in `EXEMPT`, each with its reason. The index itself must be the one
`write_figures_index` writes from the committed files (a table regenerated alone leaves it stale).
"""
import csv, re, subprocess, sys
from pathlib import Path
from wordbench.core import project_root

ROOT = project_root()
BASELINE_WORDS = {'chance', 'majority', 'baseline', 'frequent', 'uniform', 'neither'}
EXEMPT = {  # file: why it has an accuracy column but no interval or baseline
    'lm_benchmark.md': 'a speed benchmark: `accuracy` checks that every system scores the same items alike',
    'lm_benchmark_cuda.md': 'the same speed benchmark on a GPU',
}


def tokens(name: str) -> list[str]: return [t for t in re.split(r'[^a-z0-9%]+', name.lower()) if t]


def is_accuracy(name: str) -> bool:
    t = tokens(name)
    return (bool({'acc', 'accuracy', 'bacc'} & set(t)) or bool(re.search(r'\btop-?\d+$', name.lower()))
            or bool(re.search(r'\d-shot$', name)) or name in {'COMA', 'COST', 'CSJ', 'Avg.'})


def is_interval(name: str) -> bool: return bool({'ci', 'lo', 'hi'} & set(tokens(name))) or '95%' in name


def is_baseline(name: str) -> bool: return bool(BASELINE_WORDS & set(tokens(name)))


def md_tables(text: str) -> list[tuple[list[list[str]], str]]:
    "Each Markdown table in `text` as its rows of cells (header first), with the first non-blank line after it."
    out, rows, lines = [], [], text.splitlines() + ['']
    for i, line in enumerate(lines):
        if line.startswith('|'):
            if not set(line) <= set('|:- '): rows.append([c.strip() for c in line.strip().strip('|').split('|')])
        elif rows:
            out.append((rows, next((x for x in lines[i:] if x.strip()), '')))
            rows = []
    return out


def table_problems(text: str) -> list[str]:
    "What each accuracy table in `text` lacks: 'interval' and/or 'baseline' (one string per missing piece)."
    problems = []
    for rows, after in md_tables(text):
        header = rows[0]
        acc = [c for c in header if is_accuracy(c)]
        if not acc: continue
        if not (any(map(is_interval, header)) or 'no interval' in after.lower()):
            problems.append(f'{acc[0]!r}: no interval')
        named = any(is_baseline(' '.join(r[:3])) for r in rows[1:])
        if not (any(map(is_baseline, header)) or named): problems.append(f'{acc[0]!r}: no baseline')
    return problems


def committed_tables() -> list[Path]:
    return [p for p in sorted((ROOT/'figures').glob('**/*.md'))
            if 'models' not in p.relative_to(ROOT/'figures').parts[:1] and p.name != 'README.md'
            and p.name not in EXEMPT]


def test_rule_fails_on_a_bare_accuracy_table_and_passes_a_complete_one():
    bare = '| model | acc | n |\n|:--|:--|:--|\n| m | 51.2 | 68 |\n'
    assert table_problems(bare) == ["'acc': no interval", "'acc': no baseline"]
    full = '| model | acc | 95% CI | chance | n |\n|:--|:--|:--|:--|:--|\n| m | 51.2 | 39.6 to 62.7 | 50.0 | 68 |\n'
    assert table_problems(full) == []
    wide = '| model | COMA |\n|:--|:--|\n| m | 9.52 |\n| majority | 42.86 |\n\nNo interval: the paper reports none.\n'
    assert table_problems(wide) == []
    assert table_problems('| model | top1_agreement | seconds |\n|:--|:--|:--|\n| m | 1.0 | 3 |\n') == []


def test_every_committed_accuracy_table_has_an_interval_and_a_baseline():
    tables = committed_tables()
    assert len(tables) > 50, 'figures/ not generated (wordbench regenerate)'
    bad = {p.name: pr for p in tables if (pr := table_problems(p.read_text()))}
    assert not bad, bad


def test_each_accuracy_tables_csv_has_the_markdown_columns():
    "An accuracy table's CSV and Markdown list the same columns, in the same order."
    checked = 0
    for p in committed_tables():
        tables = md_tables(p.read_text())
        if not tables or not any(map(is_accuracy, tables[0][0][0])) or not p.with_suffix('.csv').exists(): continue
        with p.with_suffix('.csv').open(newline='') as f: header = next(csv.reader(f))
        assert header == tables[0][0][0], p.name
        checked += 1
    assert checked > 20


def test_the_figures_index_is_current(tmp_path):
    "figures/README.md lists and repeats what the committed figures hold now, in `wordbench regenerate`'s order."
    figures = ROOT/'figures'
    for p in figures.iterdir():
        if p.name != 'README.md': (tmp_path/p.name).symlink_to(p)
    # a fresh process registers the analyses as the CLI does (a test module may have imported a system early)
    script = '\n'.join(['import sys', 'from wordbench.publish.regenerate import write_figures_index',
                        'from wordbench.systems import load_systems', 'load_systems()',
                        'write_figures_index(sys.argv[1])'])
    subprocess.run([sys.executable, '-c', script, str(tmp_path)], check=True)
    expected = (tmp_path/'README.md').read_text()
    assert (figures/'README.md').read_text() == expected, 'run write_figures_index(figures) (or wordbench regenerate)'
