#!/usr/bin/env python3
"""Checks that the documentation says what is true (ctest -R Docs).

usage: check_docs.py links SOURCE_DIR
       check_docs.py readme-commands SOURCE_DIR BUILD_DIR
       check_docs.py results SOURCE_DIR

links            every relative link in the repository's Markdown files resolves
readme-commands  every command in README.md's sh blocks that starts with dist/ and needs
                 neither root nor a GPU (a line's "# needs a GPU" says so; a line with a
                 <placeholder> shows a form and is not run) runs and exits
                 0, with dist/ read as BUILD_DIR (the build tree has the installed layout)
results          docs/results/<gpu>.md regenerates byte for byte from the recorded
                 results folders in docs/results/<gpu>/
"""
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

SKIP_DIRS = {".git", "build", "build-gpu", "dist", "dist-gpu", ".devkit", "results", "node_modules"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files(root):
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            if f.endswith(".md"):
                yield os.path.join(here, f)


def check_links(root):
    bad = []
    for md in markdown_files(root):
        with open(md) as f:
            text = f.read()
        # Links inside code blocks are examples, not links.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(md), path))):
                bad.append(f"{os.path.relpath(md, root)}: {target}")
    for b in bad:
        print("broken link:", b)
    print(f"links: {len(bad)} broken")
    return 1 if bad else 0


def readme_commands(root):
    with open(os.path.join(root, "README.md")) as f:
        text = f.read()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            command = command.strip()
            # A command with a <placeholder> (results/<run-id>) shows a form, not a runnable line.
            if command.startswith("dist/") and "needs a GPU" not in comment and not re.search(r"<[a-z-]+>", command):
                out.append(command)
    return out


def run_readme_commands(root, build):
    commands = readme_commands(root)
    if not commands:
        print("README.md has no dist/ command that needs neither root nor a GPU: nothing to check")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="cudatrace-readme-") as cwd:
        for command in commands:
            argv = shlex.split(command)
            argv[0] = os.path.join(build, argv[0][len("dist/"):])
            r = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} (exit {r.returncode}) {command}")
            if r.returncode != 0:
                failed += 1
                print(r.stdout[-3000:])
    return 1 if failed else 0


def check_results(root):
    docs = os.path.join(root, "docs", "results")
    pages = sorted(glob.glob(os.path.join(docs, "*.md")))
    if not pages:
        print("no docs/results/*.md")
        return 1
    failed = 0
    for page in pages:
        inputs = sorted(glob.glob(os.path.join(page[:-3], "*")))
        # Written beside the page, so that it names its inputs by the same relative paths.
        out = os.path.join(docs, ".regenerated-" + os.path.basename(page))
        try:
            subprocess.run([sys.executable, os.path.join(root, "docs", "make_results_doc.py"), *inputs, "-o", out],
                           check=True)
            with open(out) as f:
                fresh = f.read()
        finally:
            if os.path.exists(out):
                os.remove(out)
        with open(page) as f:
            kept = f.read()
        if fresh != kept:
            failed += 1
            sys.stdout.writelines(difflib.unified_diff(kept.splitlines(True), fresh.splitlines(True), page, "regenerated"))
        print(f"{os.path.relpath(page, root)}: {'identical' if fresh == kept else 'DIFFERS'} ({len(inputs)} inputs)")
    return 1 if failed else 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    what, root = sys.argv[1], os.path.abspath(sys.argv[2])
    if what == "links":
        return check_links(root)
    if what == "readme-commands" and len(sys.argv) == 4:
        return run_readme_commands(root, os.path.abspath(sys.argv[3]))
    if what == "results":
        return check_results(root)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
