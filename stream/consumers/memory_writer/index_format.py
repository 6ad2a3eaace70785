"""The memory writer's index format, apart from the writer so that `--version` names it
without importing a Kafka client.

Format 1: `OUT/.index/<session>.ids`, one `[size after, entry id]` JSON line per written
entry, the layout 0.1.0 wrote. The folder names its format in `OUT/.index/FORMAT`; a folder
without that file was written by 0.1.0, format 1 too.
"""

INDEX_FORMAT = 1
FORMAT_FILE = "FORMAT"
