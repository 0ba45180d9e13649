"""Readable text report of an analysis: root cause first, then what was set aside."""

from __future__ import annotations

from kb.core.records import Analysis


def format_analysis(result: Analysis) -> str:
    out: list[str] = []
    root = result.root_cause
    if root is None:
        out.append("Not captured in this log." if result.verdict == "not_captured" else "No error found in this log.")
    else:
        title = root.headline or "(exception line missing)"
        out.append(f"ROOT CAUSE  {title}")
        where = f"line {root.line_number}" if root.line_number else "line ?"
        out.append(f"  process   {root.process or '(main)'}  {where}  confidence {root.confidence:.2f}")
        if len(root.ranks) > 1:
            out.append(f"  repeated  by {len(root.ranks)} processes: {', '.join(root.ranks[:8])}")
        if root.truncated:
            out.append("  truncated the traceback's exception line is missing or incomplete in this log")
        if root.reason:
            out.append(f"  why       {root.reason}")
        if root.frames:
            out.append("  frames (most recent last):")
            for frame in root.frames[-8:]:
                out.append(f"    {frame.path or frame.file}:{frame.line} in {frame.function}")
                if frame.code:
                    out.append(f"        {frame.code}")
    for note in result.notes:
        out.append(f"  note      {note}")
    ctx = result.context
    out.append("")
    out.append("CONTEXT")
    rows = [
        ("engine", " ".join(x for x in (ctx.engine, ctx.engine_version) if x)),
        ("model", " ".join(x for x in (ctx.model, f"({ctx.model_arch})" if ctx.model_arch else "") if x)),
        ("gpu", " x ".join(str(x) for x in (ctx.gpu.count, ctx.gpu.name) if x)),
        ("parallel", " ".join(f"{k}={v}" for k, v in (("tp", ctx.parallel.tp), ("dp", ctx.parallel.dp),
                                                       ("pp", ctx.parallel.pp), ("ep", ctx.parallel.ep)) if v)),
        ("speculative", " ".join(x for x in (ctx.speculative.method, ctx.speculative.draft_model) if x)),
        ("dtype", ctx.dtype or ""), ("quantization", ctx.quantization or ""),
        ("CUDA_VISIBLE_DEVICES", ctx.cuda_visible_devices or ""),
        ("torch / CUDA", " / ".join(x for x in (ctx.torch_version, ctx.cuda_version) if x)),
        ("hosts", ", ".join(ctx.hosts[:4]) + (" ..." if len(ctx.hosts) > 4 else "")),
        ("phase", result.phase),
        ("time to crash", f"{result.timing.seconds_to_crash:.1f} s" if result.timing.seconds_to_crash is not None else ""),
    ]
    out.extend(f"  {name:<21} {value}" for name, value in rows if value)
    if result.symptoms:
        out.append("")
        out.append("SET ASIDE")
        for event in result.symptoms[:12]:
            text = event.headline
            out.append(f"  [{event.role}] {text.splitlines()[0][:140] if text else ''}")
            out.append(f"      {event.process or '(main)'} line {event.line_number}: {event.reason}")
    out.append("")
    out.append(f"FINGERPRINT v{result.fingerprint.version} {result.fingerprint.hash}")
    out.append(f"  {result.fingerprint.signature}")
    if result.redactions:
        out.append(f"  {result.redactions} secret(s) redacted")
    return "\n".join(out)
