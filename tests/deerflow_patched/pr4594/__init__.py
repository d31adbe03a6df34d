"""DeerFlow PR #4594 (per-agent fact buckets) applied: every memory route takes ``?agent_name=``;
summaries are the user's, shared by all the user's agents."""
