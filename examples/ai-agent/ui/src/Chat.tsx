import { Fragment, useCallback, useEffect, useLayoutEffect, useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import {
  API,
  ApiError,
  call,
  formatBytes,
  sizeProblem,
  type AgentEvent,
  type Interrupt,
  type Plan,
  type Snapshot,
  type StoredMessage,
} from "./api";
import { Markdown } from "./Markdown";

// The chat page of one durable Agent. Durable state comes from one snapshot, refreshed on
// every mutation, every live event, focus, reconnect and every 8 seconds; the live
// Thinking / Response cards and activity rows come from the SSE event stream.

const HIDDEN_TOOLS = new Set(["write_todos"]);
const FALLBACK_REFRESH_MS = 8000;
const FOLLOW_DISTANCE_PX = 160;
const MAX_ACTIVITY = 30;
const SHOWN_ACTIVITY = 8;
const QUIET_EVENTS = new Set(["usage_recorded"]);
const TURN_END_EVENTS = new Set(["turn_completed", "turn_failed", "turn_cancelled"]);

// What the status pill says; the session's own status stays in data-status.
const STATUS_LABELS: Record<string, string> = {
  initializing: "Starting",
  waiting_for_user_message: "Ready",
  running_model: "Thinking",
  running_tools: "Running tools",
  waiting_for_tool_approval: "Needs your approval",
  waiting_for_input: "Needs your answer",
  waiting_for_timer: "Waiting on a timer",
  compacting: "Summarizing",
  closed: "Stopped",
};

interface LiveText {
  key: string;
  turn: string;
  text: string;
  reasoning: string;
  done: boolean;
}
interface Activity {
  id: string;
  kind: string;
  detail: string;
}
interface Optimistic {
  id: string;
  text: string;
  planMode: boolean;
}

const isSend = (event: KeyboardEvent) => event.key === "Enter" && (event.metaKey || event.ctrlKey || event.altKey);

export function Chat({
  workflowId,
  onNewAgent,
  onTitled,
}: {
  workflowId: string;
  onNewAgent: () => void;
  onTitled: () => void;
}) {
  const [snapshot, setSnapshot] = useState<Snapshot | null>(null);
  // The snapshot answered 404: no Agent with this ID here.
  const [missing, setMissing] = useState(false);
  const [showDetails, setShowDetails] = useState(false);
  const titled = useRef(false);
  const [live, setLive] = useState<LiveText[]>([]);
  const [activity, setActivity] = useState<Activity[]>([]);
  const [optimistic, setOptimistic] = useState<Optimistic[]>([]);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState("");
  // A calm note, not an error: e.g. a queued message the Agent took before a click landed.
  const [notice, setNotice] = useState("");
  // The last refresh failed (e.g. no Worker while one restarts); cleared by the next success.
  const [offline, setOffline] = useState("");
  const [draft, setDraft] = useState("");
  const [planMode, setPlanMode] = useState(false);
  // An accepted Execute plan, until its executing turn shows up in the snapshot.
  const [executionRequest, setExecutionRequest] = useState<{ revision: number; lastSequence: number } | null>(null);
  const composer = useRef<HTMLTextAreaElement>(null);
  const dock = useRef<HTMLDivElement>(null);
  const [dockHeight, setDockHeight] = useState(0);
  const following = useRef(true);
  const sequence = useRef(0);
  // Turns known to have ended: a snapshot stored their messages while another turn or none
  // was active, or their end event came.
  const endedTurns = useRef(new Set<string>());

  const refresh = useCallback(async () => {
    const mine = ++sequence.current;
    try {
      const next = await call<Snapshot>(`/snapshot?workflowId=${encodeURIComponent(workflowId)}`);
      if (mine !== sequence.current) return; // a newer refresh answered first
      setSnapshot(next);
      setOffline("");
      for (const message of next.messages) {
        if (message.turn_id !== next.state?.active_turn_id) endedTurns.current.add(message.turn_id);
      }
      const active = next.state?.active_turn_id ?? null;
      // A live card of another turn than the active one has ended, whatever ended it
      // (a reply stored, a stop, a failure): only the active turn's model call streams.
      setLive((items) =>
        items
          .map((item) =>
            next.state?.status !== "running_model" || item.turn !== active ? { ...item, text: "", done: true } : item,
          )
          .filter((item) => item.reasoning || !item.done),
      );
      if (!titled.current && next.messages.some((message) => message.role === "user")) {
        titled.current = true; // the conversation list shows the first message as title
        onTitled();
      }
    } catch (reason) {
      if (mine !== sequence.current) return;
      if (reason instanceof ApiError && reason.status === 404) setMissing(true);
      else setOffline((reason as Error).message);
    }
  }, [workflowId, onTitled]);

  // Refresh on load, focus, reconnect, visibility, and every 8 s while visible.
  useEffect(() => {
    // The first refresh answers for a focus or visibility event that comes while it is
    // in flight (a reload focuses the window): one snapshot request per load.
    let loading = true;
    void refresh().finally(() => (loading = false));
    const onVisible = () => document.visibilityState === "visible" && !loading && void refresh();
    window.addEventListener("focus", onVisible);
    window.addEventListener("online", onVisible);
    document.addEventListener("visibilitychange", onVisible);
    const timer = window.setInterval(onVisible, FALLBACK_REFRESH_MS);
    return () => {
      window.removeEventListener("focus", onVisible);
      window.removeEventListener("online", onVisible);
      document.removeEventListener("visibilitychange", onVisible);
      window.clearInterval(timer);
    };
  }, [refresh]);

  // Live events: one EventSource from the first snapshot's resume token; it resumes by itself.
  const firstToken = snapshot?.resume_token;
  const hasSnapshot = snapshot !== null;
  useEffect(() => {
    if (!hasSnapshot || snapshot?.flow.status !== "running") return;
    let debounce = 0;
    const source = new EventSource(
      `${API}/events?workflowId=${encodeURIComponent(workflowId)}&resumeToken=${encodeURIComponent(firstToken ?? "")}`,
    );
    source.onmessage = (message) => {
      const event = JSON.parse(message.data) as AgentEvent;
      applyEvent(event);
      window.clearTimeout(debounce);
      debounce = window.setTimeout(() => void refresh(), 250);
    };
    return () => {
      window.clearTimeout(debounce);
      source.close();
    };
    // Open once per Agent; later snapshots must not reopen the stream.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [hasSnapshot, workflowId]);

  function applyEvent(event: AgentEvent) {
    const payload = safeJson(event.payload) as Record<string, unknown>;
    const key = `${event.step_execution_id}#${event.attempt}`;
    if (TURN_END_EVENTS.has(event.type)) endedTurns.current.add(event.turn_id);
    if (event.type === "turn_cancelled" || event.type === "turn_failed") {
      // A stopped or failed turn's reply is never stored: its live text goes now. (A
      // completed turn's card stays until the snapshot shows the stored reply.)
      setLive((items) =>
        items
          .map((item) => (item.turn === event.turn_id ? { ...item, text: "", done: true } : item))
          .filter((item) => item.reasoning || !item.done),
      );
    }
    // A late text delta of an ended turn would show its live card again next to the stored
    // reply; the reasoning summary stays live-only, so its deltas always count.
    if (event.type === "text_delta" && endedTurns.current.has(event.turn_id)) return;
    if (event.type === "text_delta" || event.type === "reasoning_delta") {
      const field = event.type === "text_delta" ? "text" : "reasoning";
      setLive((items) => {
        const found = items.find((item) => item.key === key);
        const piece = String(payload.text ?? "");
        if (found) return items.map((item) => (item === found ? { ...item, [field]: item[field] + piece } : item));
        return [...items, { key, turn: event.turn_id, text: "", reasoning: "", done: false, [field]: piece }];
      });
      return;
    }
    if (QUIET_EVENTS.has(event.type)) return;
    const row = { id: `${key}-${event.type}-${Math.random()}`, kind: activityLabel(event.type, payload), detail: event.payload };
    // Each turn starts a fresh list: the rows show what the Agent is doing now.
    setActivity((items) => (event.type === "turn_started" ? [row] : [...items, row].slice(-MAX_ACTIVITY)));
  }

  // Optimistic queue items leave once the server shows the message (queued or consumed).
  useEffect(() => {
    if (!snapshot) return;
    const known = [...snapshot.queued_messages, ...snapshot.steered_messages].map((item) => item.text);
    const users = snapshot.messages.filter((message) => message.role === "user").map((message) => message.text);
    setOptimistic((items) => items.filter((item) => !known.includes(item.text) && !users.includes(item.text)));
  }, [snapshot]);

  // The page scrolls; follow new content while the reader is near the bottom.
  useEffect(() => {
    const onScroll = () => {
      const distance = document.documentElement.scrollHeight - window.scrollY - window.innerHeight;
      following.current = distance < FOLLOW_DISTANCE_PX + dockHeight;
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => window.removeEventListener("scroll", onScroll);
  }, [dockHeight]);
  useLayoutEffect(() => {
    setDockHeight(dock.current?.offsetHeight ?? 0);
    if (following.current) window.scrollTo({ top: document.documentElement.scrollHeight });
  });

  async function mutate(name: string, path: string, body: object): Promise<boolean> {
    setBusy(name);
    setError("");
    setNotice("");
    try {
      await call(path, { workflowId, ...body });
      return true;
    } catch (reason) {
      if (reason instanceof ApiError && reason.status === 404 && path.startsWith("/message-queue/")) {
        // Stale: consumed or removed elsewhere. The refresh below shows the queue as it is.
        setNotice(`${capitalize(reason.message)} · the queue is up to date.`);
      } else {
        setError(reason instanceof ApiError ? reason.message : String(reason));
      }
      return false;
    } finally {
      setBusy(null);
      await refresh();
    }
  }

  async function send() {
    const text = draft.trim();
    if (!text) return;
    const item = { id: crypto.randomUUID(), text, planMode };
    setOptimistic((items) => [...items, item]);
    setDraft("");
    setPlanMode(false);
    following.current = true;
    const ok = await mutate("send", "/messages", { content: text, planMode: item.planMode });
    if (!ok) {
      setDraft(text);
      setPlanMode(item.planMode);
    }
    setOptimistic((items) => items.filter((other) => other.id !== item.id));
  }

  async function executePlan(revision: number, lastSequence: number) {
    setExecutionRequest({ revision, lastSequence });
    if (!(await mutate("plan", "/plans/execute", { revision }))) setExecutionRequest(null);
  }

  async function edit(messageId: string, text: string, itemPlanMode: boolean) {
    if (await mutate("edit", "/message-queue/delete", { messageId })) {
      // Text already typed in the composer stays, after the message taken back.
      setDraft((typed) => (typed.trim() ? `${text}\n\n${typed}` : text));
      setPlanMode(itemPlanMode);
      composer.current?.focus();
    }
  }

  if (missing) {
    return (
      <main className="chat" data-testid="missing">
        <div className="card missing">
          <h1>No Agent with this ID</h1>
          <p>
            This app has no conversation <code>{workflowId}</code>. It may belong to another server or database, or
            the link is mistyped.
          </p>
          <div className="actions">
            <button className="primary" onClick={onNewAgent}>
              Start a new Agent
            </button>
          </div>
          <p className="hint">Your conversations are listed beside this page.</p>
        </div>
      </main>
    );
  }

  if (!snapshot) {
    return <main className="chat loading">{offline ? <p className="error">{offline}</p> : "Loading the Agent…"}</main>;
  }

  const question = snapshot.pending_interrupts.find((item) => item.kind === "question");
  const approvals = snapshot.pending_interrupts.filter((item) => item.kind === "approval");
  const timers = snapshot.tool_calls.filter((callRecord) => callRecord.status === "waiting_for_timer");
  const queued = snapshot.queued_messages;
  const steered = snapshot.steered_messages;
  const idle = snapshot.state?.status === "waiting_for_user_message" && snapshot.pending_interrupts.length === 0;
  const model = snapshot.session_settings.model ?? "";
  const closed = snapshot.flow.status !== "running";
  const turnRunning = !!snapshot.state?.active_turn_id && !closed;
  const tooLarge = sizeProblem(draft, snapshot.limits);
  const approvals_ = snapshot.approvals ?? {};
  // A finished plan stays where it was last written; a current one follows the timeline.
  const plan = snapshot.plan && snapshot.plan.status !== "cleared" && snapshot.plan.tasks.length > 0 ? snapshot.plan : null;
  const lastPlanWrite = [...snapshot.messages].reverse().find((message) => message.tool_name === "write_todos");
  const planInline = plan?.status === "completed";
  const stopButton = (
    <button disabled={busy !== null} onClick={() => void mutate("cancel", "/turns/cancel", {})}>
      {busy === "cancel" ? "Stopping…" : "Stop"}
    </button>
  );
  const lastSequence = snapshot.messages.length ? snapshot.messages[snapshot.messages.length - 1].sequence : 0;
  // Pending while the session still idles on the same revision with no new message:
  // the executing turn starts with its own user message, or the status leaves idle.
  const executionPending =
    executionRequest !== null &&
    busy !== "plan" &&
    !closed &&
    snapshot.plan?.revision === executionRequest.revision &&
    snapshot.plan.status !== "completed" &&
    lastSequence === executionRequest.lastSequence &&
    snapshot.state?.status === "waiting_for_user_message";

  function planCard() {
    if (!plan || !snapshot) return null;
    return (
      <PlanCard
        plan={plan}
        canExecute={idle && queued.length === 0 && steered.length === 0 && !closed}
        busy={busy === "plan"}
        executionPending={executionPending}
        onExecute={() => void executePlan(plan.revision, lastSequence)}
      />
    );
  }

  return (
    <main className="chat" style={{ paddingBottom: dockHeight + 24 }}>
      <header className="chat-header">
        <div>
          <p className="eyebrow">Conversation</p>
          <h1>AI Agent</h1>
        </div>
        <div className="header-right">
          <span
            className={`status-pill ${idle ? "idle" : "busy"}`}
            data-testid="status"
            data-status={snapshot.agent_status}
            title={snapshot.agent_status}
          >
            <span className="dot" /> {STATUS_LABELS[snapshot.agent_status] ?? humanize(snapshot.agent_status)} · {model}
          </span>
          <button onClick={onNewAgent}>New Agent</button>
        </div>
      </header>

      {closed && (
        <div className="banner" role="alert">
          <strong>This Agent has {snapshot.flow.status === "terminated" ? "been stopped" : snapshot.flow.status}</strong>
          <span>{snapshot.flow.error ?? "The Agent run ended before it could complete."}</span>
        </div>
      )}
      {snapshot.state?.last_turn_error && <div className="banner warn">{snapshot.state.last_turn_error}</div>}

      <section className="timeline">
        {snapshot.messages.length === 0 && optimistic.length === 0 && queued.length === 0 && (
          <p className="empty">Send a message to begin.</p>
        )}
        {!planInline || lastPlanWrite ? null : planCard()}
        {snapshot.messages.map((message) => (
          <Fragment key={message.sequence}>
            <MessageBubble message={message} approval={approvals_[message.tool_call_id ?? ""]} showDetails={showDetails} />
            {planInline && message === lastPlanWrite && planCard()}
          </Fragment>
        ))}
        {approvals.map((approval) => (
          <ApprovalCard
            key={approval.interrupt_id}
            approval={approval}
            busy={busy === "approval"}
            onDecide={(approved) =>
              void mutate("approval", "/tool-approvals", { callId: approval.interrupt_id, approved })
            }
          />
        ))}
        {timers.map((timer) => {
          const args = safeJson(timer.arguments) as { duration_seconds?: number; reason?: string };
          return (
            <div key={timer.tool_call_id} className="card timer">
              <h3>Durable timer · {args.duration_seconds ?? "?"}s</h3>
              <p>{args.reason}</p>
              {timer.wait_until && <p className="hint">Fires at {new Date(timer.wait_until).toLocaleTimeString()}</p>}
              <p className="hint">Queue a message, then choose Steer to interrupt this wait.</p>
            </div>
          );
        })}
        {live.map((item) => (
          <LiveCards key={item.key} item={item} model={model} />
        ))}
        {activity.length > 0 && (
          <div className="activity" aria-label="Agent activity">
            {activity.slice(-SHOWN_ACTIVITY).map((item) => (
              <details key={item.id} className="activity-row">
                <summary>{item.kind}</summary>
                <pre>{item.detail}</pre>
              </details>
            ))}
          </div>
        )}
        {plan && !planInline && planCard()}
      </section>

      <footer className="footer">
        <details onToggle={(event) => setShowDetails(event.currentTarget.open)}>
          <summary>Technical details</summary>
          <span data-testid="flow-id">
            Flow ID: {workflowId}
            {snapshot.context_summary ? ` · summarized through #${snapshot.context_summary.last_sequence}` : ""}
          </span>
        </details>
      </footer>

      <div className="dock" ref={dock}>
        <div className={`queue ${queued.length + steered.length + optimistic.length ? "open" : "collapsed"}`}>
          <div className="queue-header">
            <strong>Message queue</strong>
            <span>
              {queued.length} queued · {steered.length} steered
            </span>
          </div>
          {queued.length + steered.length + optimistic.length > 0 && (
            <>
              <p className="hint">
                Queued messages wait for the current loop; Steer applies one at the next safe boundary.
              </p>
              <ul>
                {steered.map((item) => (
                  <li key={item.message_id} className="queue-item">
                    <span className="badge steering">Steering</span> {item.text}
                  </li>
                ))}
                {queued.map((item) => (
                  <li key={item.message_id} className="queue-item" data-testid="queued" data-message-id={item.message_id}>
                    <span className="badge queued">Queued</span>
                    {item.plan_mode && <span className="badge">Plan mode</span>}
                    <span className="queue-text">{item.text}</span>
                    <span className="queue-actions">
                      <button disabled={busy !== null} onClick={() => void edit(item.message_id, item.text, item.plan_mode)}>
                        {busy === "edit" ? "Editing…" : "Edit"}
                      </button>
                      <button
                        disabled={busy !== null}
                        onClick={() => void mutate("delete", "/message-queue/delete", { messageId: item.message_id })}
                      >
                        {busy === "delete" ? "Deleting…" : "Delete"}
                      </button>
                      <button
                        disabled={busy !== null}
                        onClick={() => void mutate("steer", "/message-queue/steer", { messageId: item.message_id })}
                      >
                        {busy === "steer" ? "Steering…" : "Steer"}
                      </button>
                    </span>
                  </li>
                ))}
                {optimistic.map((item) => (
                  <li key={item.id} className="queue-item">
                    <span className="badge submitting">Submitting</span> {item.text}
                  </li>
                ))}
              </ul>
            </>
          )}
        </div>
        {question ? (
          <QuestionPanel
            key={question.interrupt_id}
            question={question}
            busy={busy === "answer"}
            onAnswer={(answer) => void mutate("answer", "/user-input", { callId: question.interrupt_id, answer })}
            stop={turnRunning ? <div className="dock-stop">{stopButton}</div> : null}
          />
        ) : (
          <div className="composer">
            <label className="plan-toggle">
              <input type="checkbox" checked={planMode} onChange={(event) => setPlanMode(event.target.checked)} />
              Plan mode <span className="hint">Create or revise a plan without executing tools</span>
            </label>
            <div className="composer-row">
              <textarea
                aria-invalid={tooLarge ? true : undefined}
                ref={composer}
                rows={2}
                value={draft}
                disabled={closed}
                placeholder={
                  planMode
                    ? "Describe the objective; the Agent drafts a plan for you to review…"
                    : "Message the Agent… (try /wait 5 demo)"
                }
                onChange={(event) => setDraft(event.target.value)}
                onKeyDown={(event) => {
                  if (isSend(event)) {
                    event.preventDefault();
                    if (!tooLarge) void send();
                  }
                }}
              />
              <div className="composer-buttons">
                {turnRunning && stopButton}
                <button
                  className="primary"
                  disabled={!draft.trim() || busy === "send" || closed || !!tooLarge}
                  onClick={() => void send()}
                >
                  {planMode ? "Create plan" : "Send"}
                </button>
              </div>
            </div>
            {tooLarge ? (
              <p className="error" data-testid="too-large">
                {tooLarge}
              </p>
            ) : (
              <p className="hint">
                Send with ⌘/Ctrl + Enter or Alt + Enter · Enter adds a new line · up to{" "}
                {formatBytes(snapshot.limits?.messageBytes ?? 0)} a message
              </p>
            )}
          </div>
        )}
        {offline && (
          <p className="notice" role="status" data-testid="offline">
            Reconnecting… the last refresh failed ({offline}); retrying on the next event, focus or in 8 s.
          </p>
        )}
        {notice && (
          <p className="notice" role="status" data-testid="notice">
            {notice}
          </p>
        )}
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
      </div>
    </main>
  );
}

function MessageBubble({
  message,
  approval,
  showDetails,
}: {
  message: StoredMessage;
  approval?: string;
  showDetails: boolean;
}) {
  const sequence = showDetails ? message.sequence : undefined;
  if (message.tool_name && HIDDEN_TOOLS.has(message.tool_name)) return null;
  if (message.role === "user" && message.text?.startsWith("[Dex] The user approved plan revision")) {
    return <p className="note">▶ Plan execution approved{sequence ? ` · #${sequence}` : ""}</p>;
  }
  if (message.role === "user") {
    return <Bubble kind="user" title="You" sequence={sequence} body={<p>{message.text ?? ""}</p>} />;
  }
  if (message.role === "assistant" && message.tool_call_id) {
    const args = safeJson(message.tool_arguments) as Record<string, unknown>;
    if (message.tool_name === "ask_user") {
      // The question stays in the conversation, with its answer after it.
      const choices = Array.isArray(args.choices) ? (args.choices as unknown[]).map(String) : [];
      return (
        <div className="card asked" data-testid="asked-question">
          <p className="eyebrow">The Agent asked</p>
          <p className="asked-text">{String(args.question ?? "")}</p>
          {choices.length > 0 && (
            <div className="pills">
              {choices.map((choice) => (
                <span key={choice} className="pill">
                  {choice}
                </span>
              ))}
            </div>
          )}
        </div>
      );
    }
    return (
      <Bubble
        kind="tool-request"
        title={<ToolTitle prefix="Tool request" name={message.tool_name} />}
        sequence={sequence}
        badge={approval && <ApprovalBadge result={approval} />}
        body={<Arguments text={message.tool_arguments} />}
      />
    );
  }
  if (message.role === "tool") {
    const output = message.tool_output ?? message.text ?? "";
    const parsed = safeJson(output) as { status?: string; answer?: string };
    if (message.tool_name === "ask_user") {
      if (parsed.status === "answered") {
        return <Bubble kind="user" title="You answered" sequence={sequence} body={<p>{parsed.answer ?? ""}</p>} />;
      }
      return <p className="note">{output.startsWith("{") ? "The question was not answered." : output}</p>;
    }
    const outcome = approval === "rejected" || approval === "expired" ? approval : toolOutcome(output);
    return (
      <Bubble
        kind="tool"
        title={<ToolTitle prefix="Tool result" name={message.tool_name} />}
        sequence={sequence}
        badge={
          outcome && (
            <span className={`badge outcome ${outcome}`} data-testid="tool-outcome">
              {outcome}
            </span>
          )
        }
        body={<ToolOutput text={output} />}
      />
    );
  }
  if (!message.text) return null;
  return (
    <Bubble
      kind={message.role}
      title={message.role === "assistant" ? "Assistant" : "Note"}
      sequence={sequence}
      body={<Markdown text={message.text} />}
    />
  );
}

function Bubble(props: { kind: string; title: ReactNode; sequence?: number; body: ReactNode; badge?: ReactNode }) {
  return (
    <article className={`bubble ${props.kind}`} data-testid={`bubble-${props.kind}`}>
      <header>
        {props.title}
        {props.sequence !== undefined && <span className="sequence"> #{props.sequence}</span>}
        {props.badge}
      </header>
      {props.body}
    </article>
  );
}

function ToolTitle({ prefix, name }: { prefix: string; name: string | null }) {
  return (
    <>
      {prefix} · <span className="tool-label">{toolLabel(name ?? "")}</span> <code className="tool-name">{name}</code>
    </>
  );
}

const APPROVAL_TEXT: Record<string, string> = {
  pending: "Awaiting approval",
  approved: "Approved",
  rejected: "Rejected",
  expired: "Expired",
};

function ApprovalBadge({ result }: { result: string }) {
  return (
    <span className={`badge approval-result ${result}`} data-testid="approval-result">
      {APPROVAL_TEXT[result] ?? result}
    </span>
  );
}

/** A tool call's arguments as a short list; the JSON itself behind a toggle. */
function Arguments({ text }: { text: string | null }) {
  const value = safeJson(text);
  const entries =
    value && typeof value === "object" && !Array.isArray(value) ? Object.entries(value as Record<string, unknown>) : [];
  return (
    <>
      {entries.length > 0 ? (
        <dl className="arguments">
          {entries.map(([key, item]) => (
            <div key={key}>
              <dt>{humanize(key)}</dt>
              <dd>{typeof item === "string" ? item : JSON.stringify(item)}</dd>
            </div>
          ))}
        </dl>
      ) : (
        <p className="hint">No arguments.</p>
      )}
      <details className="raw">
        <summary>JSON</summary>
        <pre>{pretty(text)}</pre>
      </details>
    </>
  );
}

/** A tool's result: its text, or a JSON result pretty-printed behind a toggle. */
function ToolOutput({ text }: { text: string }) {
  const value = safeJson(text);
  if (value && typeof value === "object" && text.trim().startsWith("{")) {
    const summary = (value as Record<string, unknown>).status;
    return (
      <details className="raw" open={typeof summary !== "string"}>
        <summary>{typeof summary === "string" ? `Result: ${humanize(summary)}` : "Result"}</summary>
        <pre>{pretty(text)}</pre>
      </details>
    );
  }
  return <p className="tool-text">{text}</p>;
}

function LiveCards({ item, model }: { item: LiveText; model: string }) {
  const [open, setOpen] = useState<boolean | null>(null);
  return (
    <>
      {item.reasoning && (
        <details className="card thinking" open={open ?? !item.done} onToggle={(event) => setOpen(event.currentTarget.open)}>
          <summary>
            Thinking <span className="hint">{item.done ? "Reasoning summary" : "Streaming reasoning summary…"}</span>
          </summary>
          <p>{item.reasoning}</p>
        </details>
      )}
      {item.text && !item.done && (
        <div className="card response" data-testid="live-response">
          <header>
            <span className="pulse" /> Response <span className="hint">{model}</span>
          </header>
          <Markdown text={item.text} />
        </div>
      )}
    </>
  );
}

function PlanCard(props: {
  plan: Plan;
  canExecute: boolean;
  busy: boolean;
  executionPending: boolean;
  onExecute: () => void;
}) {
  const { plan } = props;
  const done = plan.tasks.filter((task) => task.status === "completed").length;
  const icon = { pending: "○", in_progress: "●", completed: "✓" };
  return (
    <div className="card plan" data-testid="plan">
      <header>
        <h3>Plan · {plan.status}</h3>
        <span className="hint">
          revision {plan.revision} · {done}/{plan.tasks.length} completed
        </span>
      </header>
      <ol>
        {plan.tasks.map((task, index) => (
          <li key={index} className={task.status}>
            <span className="icon">{icon[task.status]}</span> {task.content}{" "}
            <span className="hint">{task.status.replace("_", " ")}</span>
          </li>
        ))}
      </ol>
      {plan.status === "active" && props.canExecute && !props.executionPending && (
        <p className="hint" data-testid="plan-stopped">
          Stopped before every task was done. A new message revises the plan without running tools; Continue plan
          resumes it.
        </p>
      )}
      {props.executionPending && (
        <p className="hint execution-pending" data-testid="execution-pending">
          <span className="pulse" /> Execution request pending…
        </p>
      )}
      {plan.status !== "completed" && props.canExecute && !props.executionPending && (
        <button className="primary" disabled={props.busy} onClick={props.onExecute}>
          {props.busy ? "Requesting…" : plan.status === "draft" ? "Execute plan" : "Continue plan"}
        </button>
      )}
    </div>
  );
}

function ApprovalCard(props: { approval: Interrupt; busy: boolean; onDecide: (approved: boolean) => void }) {
  return (
    <div className="card approval" data-testid="approval">
      <h3>Approve tool: {props.approval.tool_name}</h3>
      <Arguments text={props.approval.arguments} />
      <p className="hint">This operation may change an external system or have an unknown effect.</p>
      <div className="actions">
        <button className="primary" disabled={props.busy} onClick={() => props.onDecide(true)}>
          Approve
        </button>
        <button disabled={props.busy} onClick={() => props.onDecide(false)}>
          Reject
        </button>
      </div>
    </div>
  );
}

function QuestionPanel(props: {
  question: Interrupt;
  busy: boolean;
  onAnswer: (answer: string) => void;
  stop: ReactNode;
}) {
  const [answer, setAnswer] = useState("");
  const [picked, setPicked] = useState<string | null>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  useEffect(() => input.current?.focus(), []);
  const choices = props.question.choices ?? [];
  const freeText = choices.length === 0 || props.question.allows_free_text !== false;
  return (
    <>
    <div className="question" data-testid="question">
      <span className="question-badge">?</span>
      <div className="question-body">
        <p className="eyebrow">Agent needs your input</p>
        <h3>{props.question.question}</h3>
        {choices.length > 0 && (
          <div className="choices">
            {choices.map((choice) => (
              <button
                key={choice}
                disabled={props.busy}
                onClick={() => {
                  setPicked(choice);
                  props.onAnswer(choice);
                }}
              >
                {choice} {picked === choice ? "✓" : "→"}
              </button>
            ))}
          </div>
        )}
        {freeText && (
          <div className="composer-row">
            <textarea
              ref={input}
              rows={2}
              value={answer}
              placeholder="Type your answer…"
              onChange={(event) => setAnswer(event.target.value)}
              onKeyDown={(event) => {
                if (isSend(event) && answer.trim()) {
                  event.preventDefault();
                  props.onAnswer(answer.trim());
                }
              }}
            />
            <button className="primary" disabled={!answer.trim() || props.busy} onClick={() => props.onAnswer(answer.trim())}>
              {props.busy ? "Sending…" : "Submit answer"}
            </button>
          </div>
        )}
        <p className="hint">The Agent waits for your answer and goes on once you send it, even after a restart.</p>
      </div>
    </div>
    {props.stop}
    </>
  );
}

// The library's texts for a call that never ran because the turn was steered or stopped.
const NOT_RUN_PREFIX = "The tool call was not run:";

function toolOutcome(output: string): string | undefined {
  if (output.startsWith(NOT_RUN_PREFIX)) return "interrupted";
  const status = (safeJson(output) as { status?: unknown }).status;
  return typeof status === "string" ? status.replace(/_/g, " ") : undefined;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function safeJson(text: string | null): unknown {
  try {
    return JSON.parse(text ?? "");
  } catch {
    return {};
  }
}

function pretty(text: string | null): string {
  try {
    return JSON.stringify(JSON.parse(text ?? ""), null, 2);
  } catch {
    return text ?? "";
  }
}

function humanize(text: string): string {
  const words = text.replace(/_/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** `slack__post_message` reads "Slack: post message". */
function toolLabel(name: string): string {
  const [server, tool] = name.includes("__") ? name.split("__", 2) : ["", name];
  const action = tool.replace(/_/g, " ");
  return server ? `${humanize(server)}: ${action}` : humanize(action);
}

const BUILT_IN_ACTIVITY: Record<string, [string, string]> = {
  ask_user: ["Preparing a question", "Question answered"],
  durable_wait: ["Setting a timer", "Timer done"],
  write_todos: ["Updating the plan", "Plan updated"],
};

/** What a live event means, in words. */
function activityLabel(type: string, payload: Record<string, unknown>): string {
  const tool = typeof payload.tool_name === "string" ? toolLabel(payload.tool_name) : "a tool";
  const builtIn = BUILT_IN_ACTIVITY[String(payload.tool_name ?? "")];
  switch (type) {
    case "turn_started":
      return "Started working";
    case "turn_completed":
      return "Finished";
    case "turn_failed":
      return `Failed: ${String(payload.error ?? "an error")}`;
    case "turn_cancelled":
      return "Stopped";
    case "turn_steered":
      return "Redirected by your message";
    case "tool_call_deferred":
      if (builtIn) return builtIn[0];
      return payload.requires_approval ? `Wants to use ${tool} (needs your approval)` : `Wants to use ${tool}`;
    case "tool_call_started":
      return builtIn ? builtIn[0] : `Using ${tool}`;
    case "tool_call_finished":
      if (builtIn) return builtIn[1];
      return `${tool}: ${humanize(String(payload.status ?? "done")).toLowerCase()}`;
    case "interrupt_raised":
      return payload.kind === "question" ? "Asked you a question" : `Waiting for your approval of ${tool}`;
    case "interrupt_resolved":
      if (payload.answered) return "Got your answer";
      return payload.approved ? "Approved" : "Not approved";
    case "timer_started":
      return "Waiting on a timer";
    case "compaction_started":
      return "Summarizing older messages";
    case "compaction_finished":
      return "Summarized older messages";
    case "plan_updated":
      return `Updated the plan (revision ${String(payload.revision ?? "?")})`;
    case "plan_execution_started":
      return "Started the plan";
    case "tool_task_started":
      return `${tool} started a background task`;
    default:
      return humanize(type);
  }
}
