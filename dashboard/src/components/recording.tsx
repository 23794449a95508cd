/**
 * A stopped browser's MP4 recording. The recording is finished a little after the browser stops
 * (409 meanwhile): it is asked for again every two seconds until it is ready or known absent.
 */
import { NotFoundError, ConflictError, type Recording } from '@agent-task-service/client';
import type { Ref } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ErrorNotice } from './error-notice.tsx';

export function RecordingPlayer({ browserId, videoRef, onTime }: { browserId: string; videoRef?: Ref<HTMLVideoElement>; onTime?: (seconds: number) => void }) {
  const client = useClient();
  const [rec, setRec] = useState<Recording | null>(null);
  const [state, setState] = useState<'waiting' | 'ready' | 'none' | 'error'>('waiting');
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ask = async () => {
      try {
        const r = await client.browsers.recording(browserId);
        if (!live) return;
        setRec(r);
        setState('ready');
      } catch (err) {
        if (!live) return;
        if (err instanceof ConflictError) timer = setTimeout(ask, 2000);
        else if (err instanceof NotFoundError) setState('none');
        else {
          setError(err);
          setState('error');
        }
      }
    };
    void ask();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [browserId]);
  if (state === 'waiting') {
    return (
      <p class="muted" role="status">
        The recording is being finished…
      </p>
    );
  }
  if (state === 'none') return <p class="muted">This browser has no recording.</p>;
  if (state === 'error') return <ErrorNotice error={error} />;
  return (
    <div class="recording">
      <video ref={videoRef} class="recording-video" src={rec!.url} controls preload="metadata" playsInline onTimeUpdate={(e) => onTime?.((e.currentTarget as HTMLVideoElement).currentTime)}>
        Your browser cannot play this MP4; <a href={rec!.url}>download it</a>.
      </video>
      <p class="small">
        <a href={rec!.url} download>
          Download the recording (MP4)
        </a>
      </p>
    </div>
  );
}
