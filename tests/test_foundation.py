"End-to-end checks of the foundation: offline resources, raw data counts, the CLI and the main job's papermill path."
import os, subprocess, sys
from pathlib import Path
import pytest

BIN = Path(sys.executable).parent


def test_wordnet_definition_of_fear_verb():
    from wordbench.resources import wordnet
    s = wordnet().synsets('fear', pos='v')[0]
    assert s.definition() == 'be afraid or feel anxious or apprehensive about a possible or probable situation or event'


def test_spacy_parses_a_sentence():
    from wordbench.resources import spacy_pipeline
    doc = spacy_pipeline()('The trophy does not fit into the suitcase because it is too large.')
    large = [t for t in doc if t.text == 'large'][0]
    assert (large.pos_, large.tag_, large.lemma_) == ('ADJ', 'JJ', 'large')


def test_smollm2_prefers_the_grammatical_sentence():
    from wordbench.models.lm import get_lm, LoglikelihoodRequest
    lm = get_lm('hf', 'smollm2-135m')
    good, bad = lm.loglikelihood([LoglikelihoodRequest('The', ' cat sat on the mat.'),
                                  LoglikelihoodRequest('The', ' cat sat mat the on.')])
    assert good[0] > bad[0], (good, bad)


@pytest.mark.parametrize('load,expected', [
    ("load_winogrande('dev')", 1267), ("load_wsc()", 285), ("load_wscplus()", 3026),
    ("load_newterm('COMA', 2022, clean=True)", 255), ("load_winodict_words()", 1609),
    ("load_foreign_words()", 20), ("load_newterm('CSJ', 2023)", 300)])
def test_raw_source_row_counts(load, expected):
    from wordbench.winodict import sources as winodict
    from wordbench.newterm import sources as newterm
    from wordbench.wscplus import sources as wscplus
    assert len(eval(load, {**vars(winodict), **vars(newterm), **vars(wscplus)})) == expected


def test_doctor_finds_every_resource():
    out = subprocess.run([BIN/'wordbench', 'doctor', '--strict'], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in ['raw data', 'wordnet', 'spacy', 'english-words', 'embeddings', 'smollm2-135m', 'gemma3-270m']:
        line = next(l for l in out.stdout.splitlines() if l.startswith(f'| {name} '))
        assert '| found ' in line, line


def test_regenerate_writes_table_and_figure(tmp_path):
    out = subprocess.run([BIN/'wordbench', 'regenerate', 'raw_sources', '--out', str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {p.name for p in tmp_path.iterdir()} >= {f'raw_sources.{ext}' for ext in ('csv', 'md', 'png', 'svg')}
    assert 'winogrande/dev' in (tmp_path/'raw_sources.csv').read_text()


def test_help_lists_registered_tasks_and_builders():
    out = subprocess.run([BIN/'wordbench', 'eval', '--help'], capture_output=True, text=True)
    assert out.returncode == 0 and 'winodict' in out.stdout and 'winodict-foreign' in out.stdout, out.stdout
    out = subprocess.run([BIN/'wordbench', 'build', '--help'], capture_output=True, text=True)
    assert out.returncode == 0 and 'winodict' in out.stdout, out.stdout
    out = subprocess.run([BIN/'wordbench', 'list', 'tasks', '--grid', 'cpu'], capture_output=True, text=True)
    assert out.stdout.split()[:2] == ['winodict', 'winodict-foreign'], out.stdout


@pytest.mark.parametrize('args,expected', [
    (['eval', 'winodict', '--model', 'no-such-org/no-such-model', '--pairs', '1', '--shots', '0', '--no-cache'],
     "unknown model 'no-such-org/no-such-model'"),
    (['eval', 'winodict', '--model', './nowhere', '--pairs', '1', '--shots', '0', '--no-cache'],
     "unknown model './nowhere'"),
    (['eval', 'winodict-foreign', '--model', 'm', '--backend', 'openai', '--base-url', 'http://127.0.0.1:9/v1',
      '--device', 'cuda'],
     "backend 'openai' takes no option 'device'"),
])
def test_user_errors_are_one_line(args, expected):
    "A mistake a user can make prints one line naming it, exits 2 and shows no traceback (unless --debug)."
    out = subprocess.run([BIN/'wordbench', *args], capture_output=True, text=True,
                         env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [l for l in out.stderr.splitlines() if l.startswith('wordbench: error:')]
    assert len(errors) == 1 and expected in errors[0], out.stderr[-2000:]
    assert 'Traceback' not in out.stderr


def test_missing_raw_data_is_one_line(tmp_path):
    out = subprocess.run([BIN/'wordbench', 'build', 'winodict', '--out', str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, 'WORDBENCH_DATA': str(tmp_path/'nothing')})
    assert out.returncode == 2 and 'Traceback' not in out.stderr, out.stderr[-2000:]
    assert 'WORDBENCH_DATA' in out.stderr.splitlines()[-1], out.stderr
