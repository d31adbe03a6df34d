"""The memory document and its algebra: pure functions, the clock and ids passed in.

- ``document``: the stored document (profile sections, facts, watermarks) and the LLM's update;
- ``conversation``: which turns of a conversation memory may see;
- ``sections``: the six summary fields, applied from an update;
- ``facts``: add, reinforce, supersede, remove, expire, trim;
- ``similarity``: when two fact texts are the same fact, and when they contradict;
- ``decay``: how facts age (rank, never membership);
- ``time``: dates of events, relative dates, what questions say about time;
- ``apply``: one whole update applied to a document (the one entry point);
- ``values``: field limits and the lenient coercions every writer applies;
- ``gates``: the write gates between extraction and storage (value, grounding), one entry point;
- ``manual``: the edits a person makes (add, edit, remove a fact), protected from extraction.
"""
