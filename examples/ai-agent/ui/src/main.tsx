import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { Chat } from "./Chat";
import { Conversations, sessionHref, useSessions } from "./Conversations";
import { Portal } from "./Portal";
import "./styles.css";

// Two screens, chosen by the URL: ?workflowId=<id> is the chat page of that durable
// Agent (a reload resumes it); no workflowId is the Agent Portal. Each switch is a
// history entry, so Back returns to the previous screen; the conversation list beside
// both screens leads back to every Agent of this app.
const idFromUrl = () => new URLSearchParams(location.search).get("workflowId");

function App() {
  const [workflowId, setWorkflowId] = useState(idFromUrl);
  const [sessions, reloadSessions] = useSessions();

  useEffect(() => {
    const onPop = () => setWorkflowId(idFromUrl());
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);

  function open(id: string | null) {
    if (id !== workflowId) history.pushState(null, "", id ? sessionHref(id) : location.pathname);
    setWorkflowId(id);
    reloadSessions();
  }

  return (
    <div className="app-shell">
      <Conversations sessions={sessions} current={workflowId} onOpen={open} />
      {workflowId ? (
        <Chat key={workflowId} workflowId={workflowId} onNewAgent={() => open(null)} onTitled={reloadSessions} />
      ) : (
        <Portal onStarted={open} />
      )}
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
