import { useCallback, useEffect, useState, type MouseEvent } from "react";
import { call, type SessionSummary } from "./api";

// The conversations of this app, newest first (the engine's Flow search): the way back
// to an earlier Agent, from the Portal and from every chat.

export function useSessions(): [SessionSummary[] | null, () => void] {
  const [sessions, setSessions] = useState<SessionSummary[] | null>(null);
  const load = useCallback(() => {
    call<{ sessions: SessionSummary[] }>("/sessions")
      .then((data) => setSessions(data.sessions))
      .catch(() => setSessions((known) => known ?? []));
  }, []);
  useEffect(() => {
    load();
    window.addEventListener("focus", load);
    return () => window.removeEventListener("focus", load);
  }, [load]);
  return [sessions, load];
}

export function sessionHref(workflowId: string): string {
  return `?workflowId=${encodeURIComponent(workflowId)}`;
}

export function Conversations(props: {
  sessions: SessionSummary[] | null;
  current: string | null;
  onOpen: (workflowId: string | null) => void;
}) {
  const [open, setOpen] = useState(false);
  const { sessions, current } = props;
  function follow(event: MouseEvent<HTMLAnchorElement>, workflowId: string | null) {
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    setOpen(false);
    props.onOpen(workflowId);
  }
  return (
    <nav className={`sidebar ${open ? "open" : ""}`} aria-label="Conversations" data-testid="conversations">
      <div className="sidebar-head">
        <button type="button" className="sidebar-toggle" aria-expanded={open} onClick={() => setOpen(!open)}>
          ☰ Conversations{sessions ? ` (${sessions.length})` : ""}
        </button>
        <strong className="sidebar-title">Conversations</strong>
        <a className="button new-agent" href="?" onClick={(event) => follow(event, null)}>
          + New Agent
        </a>
      </div>
      <ul className="session-list">
        {sessions === null && <li className="hint">Loading…</li>}
        {sessions?.length === 0 && <li className="hint">No conversations yet.</li>}
        {sessions?.map((session) => (
          <li key={session.workflowId}>
            <a
              href={sessionHref(session.workflowId)}
              className={`session ${session.workflowId === current ? "current" : ""}`}
              aria-current={session.workflowId === current ? "page" : undefined}
              onClick={(event) => follow(event, session.workflowId)}
            >
              <span className="session-title">{session.title ?? "New conversation"}</span>
              <span className="session-meta">
                {session.status === "running" ? "" : `${session.status} · `}
                {new Date(session.startedAt).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}
              </span>
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}
