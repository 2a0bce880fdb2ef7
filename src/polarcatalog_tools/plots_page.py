"""The page `dvc plots show` and `dvc plots diff` write, made to work without network.

DVC's default page loads vega, vega-lite and vega-embed from a CDN, so on a machine without that network the page
is blank. `make venv` writes `.dvc/plots_template.html` with the three libraries inlined, and the committed
`.dvc/config` names it (`plots.html_template`). The libraries come from the npm registry as pinned, sha256-checked
tarballs, like the sprite package, at the versions DVC's own page asks for. Nothing of them runs at pipeline time.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from polarcatalog.data.packages import npm_pack

# (npm spec, sha256 of its tarball, the minified build inside it)
LIBRARIES = (
    ("vega@5.20.2", "d77deab01d6104b1239228720721f93003e60797d2faced7ffdd759fa70f989d", "package/build/vega.min.js"),
    ("vega-lite@5.2.0", "f64ca4745f043447ac86b67dc9e9592ec2b85ac8b8dafc35faf970f142463e4b", "package/build/vega-lite.min.js"),
    ("vega-embed@6.18.2", "93aeee312e92077b0252ef026c0fe0ec8fa430c19825aeada6cd3a6804e68e1b",
     "package/build/vega-embed.min.js"),
)
PAGE = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    <title>DVC plots (polarcatalog, offline)</title>
{libraries}
    <style>
        table {{ border-spacing: 15px; }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
</html>
"""


def write_template(dest: Path, cache: Path) -> Path:
    """Write the page template to `dest`, the libraries read from their tarballs (fetched into `cache` once)."""
    scripts = []
    for spec, sha256, member in LIBRARIES:
        with tarfile.open(npm_pack(spec, cache, sha256, pinned_by=f"{__name__}.LIBRARIES"), "r:gz") as tf:
            source = tf.extractfile(member).read().decode("utf-8").replace("</script", "<\\/script")
        scripts.append(f"    <script>/* {spec} */\n{source}\n    </script>")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(PAGE.format(libraries="\n".join(scripts)))
    return dest
