// Stands in for openclaw/plugin-sdk/* where a test loads the plugin's entry without OpenClaw.
export const definePluginEntry = (entry) => entry;
export const delegateCompactionToRuntime = async () => ({ ok: true, compacted: false });
export const buildMemorySystemPromptAddition = () => undefined;
export const readSessionTranscriptVisibleMessageDelta = async () => ({ kind: "missing" });
