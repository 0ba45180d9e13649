"""The API's own documentation, served whole from the installed package: the OpenAPI
document at /schema/openapi.json and Swagger UI at /schema, its scripts and styles from
the `swagger-ui-py` package (Swagger UI 5, which reads OpenAPI 3.1) instead of a CDN
(GPU clusters are often air-gapped)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.static_files import create_static_files_router
from kb import __version__

ASSETS = "/schema/assets"
DESCRIPTION = (
    "Crash knowledge base for LLM inference engines: upload a crash log, get the root cause, "
    "known fixes and a recommendation.\n\n"
    "Answers of `POST /incidents`, `POST /analyze`, `GET /incidents` and `GET /incidents/{id}` "
    "come as JSON to clients that ask for `application/json`, as a text report to terminals "
    "(curl, wget, HTTPie: `Accept: */*`) and to `Accept: text/plain`, and as the web page to "
    "browsers; `?format=json|text|html` overrides. With no `Accept` preference, clients other "
    "than terminal tools get JSON."
)


def openapi_config() -> OpenAPIConfig:
    swagger = SwaggerRenderPlugin(
        js_url=f"{ASSETS}/swagger-ui-bundle.js",
        css_url=f"{ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
        path=["/", "/swagger"],
    )
    return OpenAPIConfig(title="Crash KB", version=__version__, path="/schema",
                         description=DESCRIPTION, render_plugins=[swagger])


def _assets_dir() -> Path:
    """swagger-ui-py's bundled Swagger UI, found without importing its framework glue."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is missing: pip install -e .")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


assets = create_static_files_router(path=ASSETS, directories=[_assets_dir()],
                                    include_in_schema=False, name="api-docs-assets")
ROUTES = [assets]
