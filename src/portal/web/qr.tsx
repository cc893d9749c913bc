import { useEffect, useState } from "preact/hooks";
import QRCode from "qrcode";

/** A QR code of `text`, drawn here as SVG and shown as an image (the page's CSP allows `data:` images only). */
export function Qr({ text, label }: { text: string; label: string }) {
  const [src, setSrc] = useState<string>();
  useEffect(() => {
    let live = true;
    QRCode.toString(text, { type: "svg", margin: 1, errorCorrectionLevel: "M" }).then(
      (svg) => live && setSrc(`data:image/svg+xml;base64,${btoa(svg)}`),
      () => live && setSrc(undefined),
    );
    return () => {
      live = false;
    };
  }, [text]);
  return src ? <img class="qr" src={src} alt={label} width={200} height={200} /> : null;
}
