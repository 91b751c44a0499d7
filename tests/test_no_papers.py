"Without the papers (`WORDBENCH_SEEDS` an empty folder) the package loads and every command that needs no paper works."
import json, os, subprocess, sys
from pathlib import Path
import pytest
from wordbench.core import raw_root

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(not (raw_root()/'wscplus').is_dir(), reason='no raw data folder (wordbench fetch)')


@pytest.fixture(scope='module')
def no_papers(tmp_path_factory) -> dict:
    "The environment of a checkout with no papers: `WORDBENCH_SEEDS` an empty folder."
    return dict(os.environ, WORDBENCH_SEEDS=str(tmp_path_factory.mktemp('no_papers')))


def wordbench(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([BIN/'wordbench', *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def test_import_loads_every_system(no_papers):
    code = 'import wordbench.cli, wordbench.systems; print(len(wordbench.systems.load_systems()))'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=no_papers)
    assert out.returncode == 0 and int(out.stdout) >= 4, out.stderr


@pytest.mark.parametrize('args, shows', [(('--help',), 'doctor'), (('list', 'tasks'), 'newterm-coma'),
                                          (('list', 'builders'), 'probes-generate'), (('doctor',), 'papers')])
def test_command_runs(no_papers, args, shows):
    out = wordbench(no_papers, *args)
    assert out.returncode == 0 and shows in out.stdout and 'Traceback' not in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize('task, options', [
    ('wscplus', ('--n', 3, '--strategies', 'zero-shot', 'zero-shot-scored')),
    ('probes-cloze', ('--datasets', 'NEG-136-SIMP', 'ROLE-88', '--pairs', 2)),
    # NewTerm's evaluation prompts come from the authors' scripts in the raw data folder, not the paper
    ('newterm-coma', ('--sample', 1)), ('newterm-csj-ll', ('--sample', 1)), ('newterm-deduce', ('--sample', 1))])
def test_dummy_eval(no_papers, tmp_path, task, options):
    out = wordbench(no_papers, 'eval', task, '--backend', 'dummy', '--model', 'm', *options, '--out', tmp_path,
                    '--no-cache')
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path/f'{task}_m.csv.gz').is_file()


def test_exports_take_titles_from_the_manifest(no_papers, tmp_path):
    "The exports' citations take each paper's title from `data/papers.csv`, so exporting needs no paper."
    out = wordbench(no_papers, 'export', 'hf', '--out', tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    card = (tmp_path/'winodict'/'README.md').read_text()
    assert 'title = {{WinoDict}: Probing' in card, card[-1500:]


def test_the_newterm_builder_runs(no_papers, tmp_path):
    "The construction prompts come from the authors' scripts in the raw data folder, so building needs no paper."
    env = dict(no_papers, WORDBENCH_CACHE=str(tmp_path/'cache'))
    out = wordbench(env, 'build', 'newterm', '--backend', 'dummy', '--model', 'toy', '--scorer', 'toy',
                    '--scorer-backend', 'dummy', '--sample', 1, '--out', tmp_path/'built')
    assert out.returncode == 0 and 'Traceback' not in out.stderr, out.stderr[-2000:]
    report = json.loads((tmp_path/'built'/'report.json').read_text())
    asked = {(r['task'], r['stage']): r['asked'] for r in report['funnel']}
    for stage in (('terms', 'related'), ('COMA', 'sentences'), ('CSJ', 'true sentences')):
        assert asked[stage] > 0, asked     # each asked with a prompt read from the authors' scripts
