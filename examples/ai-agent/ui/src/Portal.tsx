import { useEffect, useMemo, useRef, useState } from "react";
import { call, type Portal as PortalData } from "./api";

// The Agent Portal: provider and model, system prompt, context, trusted MCP servers and
// tools. Starting creates the durable session and switches to the chat page.
export function Portal({ onStarted }: { onStarted: (workflowId: string) => void }) {
  const [portal, setPortal] = useState<PortalData | null>(null);
  const [error, setError] = useState("");
  const [providerId, setProviderId] = useState("mock");
  const [model, setModel] = useState("mock/dex");
  const [systemPrompt, setSystemPrompt] = useState("");
  const [contextTokens, setContextTokens] = useState(32000);
  const [mcpEnabled, setMcpEnabled] = useState(true);
  const [servers, setServers] = useState<Set<string>>(new Set());
  const [tools, setTools] = useState<Set<string>>(new Set());
  const [starting, setStarting] = useState(false);
  const known = useRef(new Set<string>());

  useEffect(() => {
    let timer = 0;
    let first = true;
    const load = () =>
      call<PortalData>("/portal")
        .then((data) => {
          setPortal(data);
          if (first) {
            first = false;
            setSystemPrompt(data.defaults.systemPrompt);
            setContextTokens(data.defaults.maxContextTokens);
            setServers(new Set(data.mcpServers));
          }
          // Tools listed since the last look are ticked, as all tools are at first.
          setTools((ticked) => {
            const next = new Set(ticked);
            for (const tool of data.tools) if (!known.current.has(tool.name)) next.add(tool.name);
            for (const tool of data.tools) known.current.add(tool.name);
            return next;
          });
          // The servers' tools are still being listed: look again shortly.
          if (data.toolsPending) timer = window.setTimeout(load, 1000);
        })
        .catch((reason: Error) => setError(reason.message));
    void load();
    return () => window.clearTimeout(timer);
  }, []);

  const provider = portal?.providers.find((item) => item.id === providerId);
  const visibleTools = useMemo(
    () => portal?.tools.filter((tool) => tool.server === null || servers.has(tool.server)) ?? [],
    [portal, servers],
  );
  const serverError =
    mcpEnabled && portal && portal.mcpServers.length > 0 && servers.size === 0
      ? "Select at least one MCP server, or disable MCP."
      : "";
  const toolError =
    mcpEnabled && !serverError && visibleTools.length > 0 && !visibleTools.some((tool) => tools.has(tool.name))
      ? "Select at least one available MCP tool, or disable MCP."
      : "";
  const canStart =
    !!portal && !!provider?.isConfigured && model.trim() !== "" && systemPrompt.trim() !== "" &&
    !serverError && !toolError && !starting;
  const missing = portal?.providers.filter((item) => !item.isConfigured && item.environmentVariable) ?? [];

  function chooseProvider(id: string) {
    const next = portal?.providers.find((item) => item.id === id);
    setProviderId(id);
    setModel(next?.defaultModel ?? "");
  }

  function toggle(set: Set<string>, value: string, update: (next: Set<string>) => void) {
    const next = new Set(set);
    if (next.has(value)) next.delete(value);
    else next.add(value);
    update(next);
  }

  async function start() {
    setStarting(true);
    setError("");
    const workflowId = crypto.randomUUID();
    try {
      await call("/start", {
        workflowId,
        provider: providerId,
        model,
        systemPrompt,
        maxContextTokens: contextTokens,
        mcpEnabled,
        enabledMcpServers: mcpEnabled ? [...servers].sort() : [],
        enabledTools: mcpEnabled ? visibleTools.filter((tool) => tools.has(tool.name)).map((tool) => tool.name) : [],
      });
      onStarted(workflowId);
    } catch (reason) {
      setError((reason as Error).message);
      setStarting(false);
    }
  }

  return (
    <main className="portal">
      <header className="hero">
        <p className="eyebrow">Dex agent portal</p>
        <h1>Configure your AI Agent</h1>
        <p className="subtitle">
          Connect a model, choose trusted capabilities, and start a durable conversation that survives restarts.
        </p>
        <ol className="steps">
          <li className="current">1 Configure</li>
          <li>2 Chat</li>
        </ol>
      </header>

      <section className="card">
        <h2>Model</h2>
        <label>
          Provider
          <select value={providerId} onChange={(event) => chooseProvider(event.target.value)}>
            {portal?.providers.map((item) => (
              <option key={item.id} value={item.id} disabled={!item.isConfigured}>
                {item.label}
                {item.isConfigured ? "" : " — not configured"}
              </option>
            ))}
          </select>
        </label>
        {missing.length > 0 && (
          <p className="hint env-hint">
            To enable more providers, set {missing.map((item) => item.environmentVariable).join(", ")} in
            examples/.env and restart the app. Keys stay on the server.
          </p>
        )}
        <label>
          Model
          <input
            value={model}
            disabled={providerId === "mock"}
            placeholder={provider?.prefix ? `${provider.prefix}/model` : "provider/model"}
            onChange={(event) => setModel(event.target.value)}
          />
        </label>
      </section>

      <section className="card">
        <h2>Instructions and context</h2>
        <label>
          System prompt
          <textarea rows={4} value={systemPrompt} onChange={(event) => setSystemPrompt(event.target.value)} />
        </label>
        <div className="row">
          <label>
            Context tokens
            <input
              type="number"
              min={64}
              value={contextTokens}
              onChange={(event) => setContextTokens(Number(event.target.value))}
            />
          </label>
          <label>
            Retained messages
            <input value={portal?.defaults.messageRetentionLimit ?? ""} disabled title="Set by the server" />
          </label>
        </div>
        <p className="hint">Older messages are summarized at 85% of the context window; the plan is never summarized.</p>
      </section>

      <section className={`card ${mcpEnabled ? "" : "dimmed"}`}>
        <h2>Tools and MCP</h2>
        <label className="switch">
          <input type="checkbox" checked={mcpEnabled} onChange={(event) => setMcpEnabled(event.target.checked)} />
          Enable MCP
        </label>
        <h3>
          MCP servers <span className="caption">Trusted Worker configuration</span>
        </h3>
        {portal && portal.mcpServers.length === 0 && (
          <p className="hint">No MCP servers are registered. Set DEX_AGENT_MCP_CONFIG before starting the Worker.</p>
        )}
        <div className="checks">
          {portal?.mcpServers.map((server) => (
            <label key={server} className="check">
              <input
                type="checkbox"
                disabled={!mcpEnabled}
                checked={servers.has(server)}
                onChange={() => toggle(servers, server, setServers)}
              />
              {server}
            </label>
          ))}
        </div>
        {serverError && <p className="error">{serverError}</p>}
        <h3>Available tools</h3>
        {portal?.toolsPending && (
          <p className="hint" data-testid="tools-pending">
            <span className="pulse" /> Listing the servers' tools… they appear here as soon as they are listed.
          </p>
        )}
        {portal && !portal.toolsPending && visibleTools.length === 0 && (
          <p className="hint">No MCP tools are available for the selected servers.</p>
        )}
        <div className="tools">
          {visibleTools.map((tool) => (
            <label key={tool.name} className="tool" data-tool={tool.name}>
              <input
                type="checkbox"
                disabled={!mcpEnabled}
                checked={tools.has(tool.name)}
                onChange={() => toggle(tools, tool.name, setTools)}
              />
              <span>
                <code>{tool.name}</code>
                {tool.requiresApproval && <span className="badge approval">approval</span>}
                <small>{tool.description}</small>
              </span>
            </label>
          ))}
        </div>
        {toolError && <p className="error">{toolError}</p>}
        <h3>Built in</h3>
        <div className="pills">
          {portal?.builtInTools.map((name) => (
            <span key={name} className="pill">
              {name}
            </span>
          ))}
        </div>
      </section>

      <section className="card dark start-bar">
        <div>
          <h2>Ready to start</h2>
          <p>
            {provider?.label ?? "…"} · {mcpEnabled ? `${visibleTools.filter((tool) => tools.has(tool.name)).length} tools` : "no MCP tools"}
            . Plans and write-tool approvals happen on the Agent page.
          </p>
          {(serverError || toolError) && <p className="error">Fix the tool selection below to start.</p>}
        </div>
        <button className="primary big" disabled={!canStart} onClick={start}>
          {starting ? "Starting Agent…" : "Start AI Agent →"}
        </button>
      </section>
      {error && <p className="error">{error}</p>}
    </main>
  );
}
