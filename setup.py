"""Package discovery over the three floors; everything else is in pyproject.toml.

``suanli`` is a namespace package spread over ``libs/`` (kernel), ``services/`` and ``apps/``.
setuptools' automatic discovery maps a namespace to a single directory, so each package found in a
root is mapped to that root here.
"""

from setuptools import find_namespace_packages, setup

ROOTS = ("libs", "services", "apps")
# suanli.data links to repository folders; their files are package data, not packages.
EXCLUDE = ["suanli.data.*", "*.__pycache__", "*.migrations"]

# The namespace itself maps to the kernel, which alone has modules at that level (suanli.clock, ...).
packages: list[str] = ["suanli"]
package_dir: dict[str, str] = {"suanli": "libs/suanli"}
for root in ROOTS:
    for package in find_namespace_packages(root, include=["suanli.*"], exclude=EXCLUDE):
        packages.append(package)
        package_dir[package] = f"{root}/{package.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
