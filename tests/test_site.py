"""The built site in headless Chromium: pages load cleanly, links and images resolve, a card shows its table, and
Inspect's viewer opens a sample of each system."""
import subprocess, sys, time
from pathlib import Path
import pytest

pytest.importorskip('mkdocs', reason="the site's builder is not installed: `make site-env`")
pytest.importorskip('selenium', reason='selenium is not installed: `make site-env`')
from wordbench.publish import site as ws  # noqa: E402
from wordbench.core import project_root  # noqa: E402
from wordbench.systems import builtin_systems  # noqa: E402

if not (ws.CHROMIUM.exists() and ws.CHROMEDRIVER.exists()):
    pytest.skip("Debian's chromium and chromium-driver are missing (`make chromium-system` could not install them)",
                allow_module_level=True)

VIEWER_PROBES = ('/logs/eval-set.json', '/logs/flow.yaml')   # optional files the viewer asks for; 404 is an answer
PAGE_FACTS = '''return {links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  imgs: [...document.querySelectorAll('img')].map(i => [i.src.slice(0, 80), i.complete, i.naturalWidth]),
  rows: document.querySelectorAll('table tr').length}'''


def fixture_bundle(tmp: Path) -> Path:
    "An Inspect viewer bundle of one tiny log per system, written with inspect_ai's classes and bundled by its CLI."
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score
    for system in builtin_systems():
        prompt = f'Which option fits this {system} fixture sentence?'
        spec = EvalSpec(created='2026-01-01T00:00:00+00:00', task=f'{system}-fixture', model='wordbench/fixture',
                        dataset=EvalDataset(name=system, samples=1), config=EvalConfig())
        sample = EvalSample(id=f'{system}/1/2022', epoch=1, input=prompt, target='A', choices=['A', 'B'],
                            messages=[ChatMessageUser(content=prompt), ChatMessageAssistant(content='A')],
                            output=ModelOutput.from_content('wordbench/fixture', 'A'), scores={'acc': Score(value=1.0)})
        write_eval_log(EvalLog(status='success', eval=spec, samples=[sample]), str(tmp/f'logs/{system}.eval'))
    inspect = Path(sys.executable).parent/'inspect'
    subprocess.run([str(inspect), 'view', 'bundle', '--log-dir', str(tmp/'logs'), '--output-dir', str(tmp/'bundle')],
                   check=True, capture_output=True)
    return tmp/'bundle'


def fresh(site: Path) -> bool:
    "Whether a built site with a viewer is newer than every file it is built from."
    if not (site/'viewer/index.html').exists(): return False
    newest = max(p.stat().st_mtime for p in ws.site_sources(project_root()).values())
    return (site/'index.html').stat().st_mtime > newest


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    "`_site` when `make site` left it fresh with a viewer; else built afresh with the real bundle or a fixture one."
    if fresh(project_root()/'_site'): return project_root()/'_site'
    tmp = tmp_path_factory.mktemp('site')
    real = project_root()/'exports/inspect-viewer'
    bundle = real if (real/'index.html').exists() else fixture_bundle(tmp)
    start = time.monotonic()
    out = ws.build_site(tmp/'site', bundle)
    print(f'site built in {time.monotonic() - start:.0f} s')
    return out


@pytest.fixture(scope='module')
def browser():
    b = ws.chromium()
    yield b
    b.quit()


def errors(browser, allowed=()) -> list:
    "The console's errors since it was last read (failed loads included), less the allowed ones."
    return [e['message'] for e in browser.get_log('browser')
            if e['level'] == 'SEVERE' and not any(a in e['message'] for a in allowed)]


def target(site: Path, url: str, base: str) -> Path:
    "The file a same-site address names."
    path = url[len(base):].split('#')[0].split('?')[0]
    return site/(path + 'index.html' if path == '' or path.endswith('/') else path)


def test_every_page_loads_its_links_and_images(site, browser):
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob('index.html')
                   if p.relative_to(site).parts[0] != 'viewer')
    assert len(pages) > 150, len(pages)
    bad, broken, images = {}, set(), 0
    with ws.serve_site(site) as base:
        for page in pages:
            browser.get(base + ('' if page == '.' else page + '/'))
            facts = browser.execute_script(PAGE_FACTS)
            dead = [i for i in facts['imgs'] if not (i[1] and i[2] > 0)]
            if errs := errors(browser) + [f'image not shown: {i[0]}' for i in dead]: bad[page] = errs
            images += len(facts['imgs'])
            broken |= {(page, u) for u in facts['links'] if u.startswith(base) and not target(site, u, base).exists()}
    assert not bad, bad
    assert not broken, sorted(broken)[:20]
    assert images > 30, images   # the figures: inline in the analysis notebooks, PNGs on the cards


def test_a_card_shows_its_table_and_figure(site, browser):
    cards = sorted(p.parent.name for p in (site/'figures/models').glob('*/index.html'))
    assert cards
    with ws.serve_site(site) as base:
        for card in cards:
            browser.get(f'{base}figures/models/{card}/')
            facts = browser.execute_script(PAGE_FACTS)
            assert facts['rows'] > 5, card
            assert any('card.png' in src and width > 0 for src, _, width in facts['imgs']), facts['imgs']
            assert f'Report card: {card}' in browser.find_element('tag name', 'h1').text


def score_names(eval_file) -> list[str]:
    "The score names of a log's first sample."
    from inspect_ai.log import read_eval_log_sample_summaries
    return list(read_eval_log_sample_summaries(str(eval_file))[0].scores or {})


def test_the_viewer_opens_a_sample_of_each_system(site, browser):
    logs = ws.bundle_logs(site/'viewer')
    systems = {ws.system_of_task(task, list(builtin_systems())): name for name, task in logs.items()}
    assert set(builtin_systems()) <= set(systems), logs
    with ws.serve_site(site) as base:
        for system in builtin_systems():
            sample = ws.log_sample(site/'viewer/logs'/systems[system])
            browser.get(base + ws.sample_url(systems[system], sample))
            names = score_names(site/'viewer/logs'/systems[system])   # the viewer: SCORE (one), NAMES (two), SCORES n
            shown = lambda body: ' SCORE ' in body or ' SCORES ' in body or all(f' {n.upper()} ' in body for n in names)
            end, body = time.monotonic() + 30, ''
            while not (names and 'INPUT' in body and shown(body)) and time.monotonic() < end:  # header renders late
                time.sleep(0.3)
                body = ' '.join(browser.find_element('tag name', 'body').text.split())
            prompt = sample['input'] if isinstance(sample['input'], str) else sample['input'][-1].text
            assert 'INPUT' in body and ' '.join(prompt.split()[:4]) in body, (system, body[:500])
            assert names and shown(body), (system, names, body[:500])
            assert not errors(browser, VIEWER_PROBES), system
