"""Documents from outside: the formats we read and write besides our own store (pure, no engine).

Low in the package: it knows the memory document (:mod:`deermem_middleware.memory`) and nothing
above it, so the configuration (DeerFlow's paths), the storage (lenient repair), the engine (the
carry-over), the DeerFlow adapter, the console and the CLI all read and write outside documents
through the same code.

- ``deerflow``: DeerFlow's v1.0 ``memory.json`` and HEAD's v2 summary file plus Markdown facts,
  both ways;
- ``deerflow_paths``: where DeerFlow keeps its config and data (its own discovery rules);
- ``deerflow_layout``: a DeerFlow data folder read whole (four v1.0 places, the v2 layout);
- ``deerflow_v2_writer``: the v2 layout written;
- ``interchange``: our export/import document held to the extraction's caps;
- ``repair``: lenient reading of DeerFlow's and older documents, fact by fact;
- ``importing``: a document from outside read, merged or replaced (``deermem import``, the
  console, the carry-over).
"""
