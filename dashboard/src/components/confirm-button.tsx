/** A destructive action asked twice: the first press shows "Confirm" and "Cancel" in its place. */
import { useEffect, useRef, useState } from 'preact/hooks';

export function ConfirmButton({ label, confirmLabel, onConfirm, busy = false, disabled = false }: { label: string; confirmLabel: string; onConfirm: () => void; busy?: boolean; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const confirmRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class="btn btn-danger" disabled={disabled || busy} onClick={() => setAsking(true)}>
        {busy ? `${label}…` : label}
      </button>
    );
  }
  return (
    <span class="confirm">
      <button
        ref={confirmRef}
        type="button"
        class="btn btn-danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" class="btn" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}
