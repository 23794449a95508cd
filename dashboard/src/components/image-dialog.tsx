/** A screenshot enlarged in a modal dialog (Escape or the button closes it; focus returns to the thumbnail). */
import { useEffect, useRef } from 'preact/hooks';

export function ImageDialog({ src, alt, onClose }: { src: string; alt: string; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);
  return (
    <dialog ref={ref} class="image-dialog" aria-label={alt} onClose={onClose} onClick={(e) => e.target === ref.current && ref.current?.close()}>
      <div class="image-dialog-bar">
        <span>{alt}</span>
        <button type="button" class="btn btn-small" onClick={() => ref.current?.close()}>
          Close
        </button>
      </div>
      <img src={src} alt={alt} />
    </dialog>
  );
}
