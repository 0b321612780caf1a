import { useCallback, useEffect, useLayoutEffect, useRef, useState, type KeyboardEvent } from "react";
import { API, ApiError, call, type AgentEvent, type Interrupt, type Plan, type Snapshot, type StoredMessage } from "./api";

// The chat page of one durable Agent. Durable state comes from one snapshot, refreshed on
// every mutation, every live event, focus, reconnect and every 8 seconds; the live
// Thinking / Response cards and activity rows come from the SSE event stream.

const HIDDEN_TOOLS = new Set(["write_todos"]);
const FALLBACK_REFRESH_MS = 8000;
const FOLLOW_DISTANCE_PX = 160;
const MAX_ACTIVITY = 30;
const SHOWN_ACTIVITY = 8;
const QUIET_EVENTS = new Set(["usage_recorded"]);
const TURN_END_EVENTS = new Set(["turn_completed", "turn_failed"]);

interface LiveText {
  key: string;
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

export function Chat({ workflowId, onNewAgent }: { workflowId: string; onNewAgent: () => void }) {
  const [snapshot, setSnapshot] = useState<Snapshot | null>(null);
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
      if (next.state?.status !== "running_model") {
        setLive((items) => items.filter((item) => item.reasoning).map((item) => ({ ...item, text: "", done: true })));
      }
    } catch (reason) {
      if (mine === sequence.current) setOffline((reason as Error).message);
    }
  }, [workflowId]);

  // Refresh on load, focus, reconnect, visibility, and every 8 s while visible.
  useEffect(() => {
    void refresh();
    const onVisible = () => document.visibilityState === "visible" && void refresh();
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
    // A late text delta of an ended turn would show its live card again next to the stored
    // reply; the reasoning summary stays live-only, so its deltas always count.
    if (event.type === "text_delta" && endedTurns.current.has(event.turn_id)) return;
    if (event.type === "text_delta" || event.type === "reasoning_delta") {
      const field = event.type === "text_delta" ? "text" : "reasoning";
      setLive((items) => {
        const found = items.find((item) => item.key === key);
        const piece = String(payload.text ?? "");
        if (found) return items.map((item) => (item === found ? { ...item, [field]: item[field] + piece } : item));
        return [...items, { key, text: "", reasoning: "", done: false, [field]: piece }];
      });
      return;
    }
    if (QUIET_EVENTS.has(event.type)) return;
    const tool = typeof payload.tool_name === "string" ? ` · ${payload.tool_name}` : "";
    const row = { id: `${key}-${event.type}-${Math.random()}`, kind: `${event.type}${tool}`, detail: event.payload };
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

  return (
    <main className="chat" style={{ paddingBottom: dockHeight + 24 }}>
      <header className="chat-header">
        <div>
          <p className="eyebrow">Durable conversation</p>
          <h1>AI Agent</h1>
        </div>
        <div className="header-right">
          <span className={`status-pill ${idle ? "idle" : "busy"}`} data-testid="status">
            <span className="dot" /> {snapshot.agent_status} · {model}
          </span>
          {snapshot.state?.active_turn_id && !closed && (
            <button disabled={busy !== null} onClick={() => void mutate("cancel", "/turns/cancel", {})}>
              {busy === "cancel" ? "Stopping…" : "Stop turn"}
            </button>
          )}
          <button onClick={onNewAgent}>New Agent</button>
        </div>
      </header>

      {closed && (
        <div className="banner" role="alert">
          <strong>Flow {snapshot.flow.status}</strong>
          <span>{snapshot.flow.error ?? "The Agent run ended before it could complete."}</span>
        </div>
      )}
      {snapshot.state?.last_turn_error && <div className="banner warn">{snapshot.state.last_turn_error}</div>}

      <section className="timeline">
        {snapshot.messages.length === 0 && optimistic.length === 0 && queued.length === 0 && (
          <p className="empty">Send a message to begin.</p>
        )}
        {snapshot.messages.map((message) => (
          <MessageBubble key={message.sequence} message={message} />
        ))}
        {live.map((item) => (
          <LiveCards key={item.key} item={item} model={model} />
        ))}
        {activity.length > 0 && (
          <div className="activity">
            {activity.slice(-SHOWN_ACTIVITY).map((item) => (
              <details key={item.id} className="activity-row">
                <summary>Agent activity · {item.kind}</summary>
                <pre>{item.detail}</pre>
              </details>
            ))}
          </div>
        )}
        {snapshot.plan && snapshot.plan.status !== "cleared" && snapshot.plan.tasks.length > 0 && (
          <PlanCard
            plan={snapshot.plan}
            canExecute={idle && queued.length === 0 && steered.length === 0 && !closed}
            busy={busy === "plan"}
            executionPending={executionPending}
            onExecute={() => void executePlan(snapshot.plan!.revision, lastSequence)}
          />
        )}
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
      </section>

      <footer className="footer">
        Flow ID: {workflowId}
        {snapshot.context_summary ? ` · summarized through ${snapshot.context_summary.last_sequence}` : ""}
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
          />
        ) : (
          <div className="composer">
            <label className="plan-toggle">
              <input type="checkbox" checked={planMode} onChange={(event) => setPlanMode(event.target.checked)} />
              Plan mode <span className="hint">Create or revise a plan without executing tools</span>
            </label>
            <div className="composer-row">
              <textarea
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
                    void send();
                  }
                }}
              />
              <button className="primary" disabled={!draft.trim() || busy === "send" || closed} onClick={() => void send()}>
                {planMode ? "Create plan" : "Send"}
              </button>
            </div>
            <p className="hint">Send with ⌘/Ctrl + Enter or Alt + Enter · Enter adds a new line</p>
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

function MessageBubble({ message }: { message: StoredMessage }) {
  if (message.tool_name && HIDDEN_TOOLS.has(message.tool_name)) return null;
  if (message.role === "user" && message.text?.startsWith("[Dex] The user approved plan revision")) {
    return <p className="note">▶ Plan execution approved · #{message.sequence}</p>;
  }
  if (message.role === "user") {
    return <Bubble kind="user" title="You" sequence={message.sequence} body={message.text ?? ""} />;
  }
  if (message.role === "assistant" && message.tool_call_id) {
    if (message.tool_name === "ask_user") return null;
    return (
      <Bubble
        kind="tool-request"
        title={`Tool request · ${message.tool_name}`}
        sequence={message.sequence}
        body={pretty(message.tool_arguments)}
        code
      />
    );
  }
  if (message.role === "tool") {
    const output = message.tool_output ?? message.text ?? "";
    const parsed = safeJson(output) as { status?: string; answer?: string };
    if (message.tool_name === "ask_user" && parsed.status === "answered") {
      return <Bubble kind="user" title="You" sequence={message.sequence} body={parsed.answer ?? ""} />;
    }
    return (
      <Bubble
        kind="tool"
        title={`Tool · ${message.tool_name}`}
        sequence={message.sequence}
        body={pretty(output)}
        outcome={toolOutcome(output)}
        code
      />
    );
  }
  if (!message.text) return null;
  return <Bubble kind={message.role} title={message.role === "assistant" ? "Assistant" : "Note"} sequence={message.sequence} body={message.text} />;
}

function Bubble(props: { kind: string; title: string; sequence: number; body: string; code?: boolean; outcome?: string }) {
  return (
    <article className={`bubble ${props.kind}`} data-testid={`bubble-${props.kind}`}>
      <header>
        {props.title} <span className="sequence">#{props.sequence}</span>
        {props.outcome && (
          <span className={`badge outcome ${props.outcome}`} data-testid="tool-outcome">
            {props.outcome}
          </span>
        )}
      </header>
      {props.code ? <pre>{props.body}</pre> : <p>{props.body}</p>}
    </article>
  );
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
          <p>{item.text}</p>
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
      <pre>{pretty(props.approval.arguments)}</pre>
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

function QuestionPanel(props: { question: Interrupt; busy: boolean; onAnswer: (answer: string) => void }) {
  const [answer, setAnswer] = useState("");
  const [picked, setPicked] = useState<string | null>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  useEffect(() => input.current?.focus(), []);
  const choices = props.question.choices ?? [];
  const freeText = choices.length === 0 || props.question.allows_free_text !== false;
  return (
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
        <p className="hint">Your answer goes through a durable Channel and resumes the Agent.</p>
      </div>
    </div>
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
