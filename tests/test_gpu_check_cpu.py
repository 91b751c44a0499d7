"""`tests/gpu/check.py --cpu-only --quick` end to end on the CPU: every section of the GPU check is in its report,
run or skipped with a reason, and the CPU sections (environment, models, CPU reference) ran.

The check itself needs a GPU to mean anything (tests/gpu/run.sh runs it there); this keeps the script working where
the tests run, so a GPU session does not spend its minutes on a broken script.
"""
import json, subprocess, sys
from pathlib import Path

CHECK = Path(__file__).parent/'gpu'/'check.py'
SECTIONS = ['S0_environment', 'S1_models', 'S2_cpu_reference', 'S3_precision', 'S4_attention', 'S5_oom',
            'S6_device_map', 'S7_shards', 'S8_throughput', 'S9_identity']


def test_cpu_smoke_run(tmp_path):
    cmd = [sys.executable, str(CHECK), '--cpu-only', '--quick', '--budget-s', '60', '--out', str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((tmp_path/'gpu_check.json').read_text())
    assert report['format'] == 'wordbench-gpu-check/2' and report['target'] is None
    secs = report['sections']
    assert list(secs) == SECTIONS
    for name, sec in secs.items():
        assert sec['status'] in ('ran', 'skipped'), (name, sec)
        if sec['status'] == 'skipped': assert sec['reason'], name
    assert all(secs[n]['reason'].startswith('needs CUDA') for n in SECTIONS[3:])
    assert secs['S0_environment']['status'] == secs['S1_models']['status'] == 'ran'
    assert secs['S2_cpu_reference']['status'] == 'ran' or secs['S2_cpu_reference']['reason'].startswith('time budget')
    models = secs['S1_models']['result']
    assert set(models['models']) == {'llama-s', 'gemma3-s', 'gemma2-s', 'qwen2-s'} and models['bos_added']
    assert models['models']['gemma2-s']['attn_implementation'] == 'eager'
    assert models['expect_gemma3_overflows_fp16'], models['gemma3_fp32_mlp_peak']
    md = (tmp_path/'gpu_check.md').read_text()
    assert all(f'| {n} |' in md for n in SECTIONS)
