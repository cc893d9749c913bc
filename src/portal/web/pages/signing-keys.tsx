import { useQuery } from "@connectrpc/connect-query";
import { KeysService, SigningKey_StatusSchema } from "../../../../gen/partner/v1/keys_pb.ts";
import { ErrorBox, enumName, Loading, Page, TableWrap, Time } from "../ui.tsx";

/** The environment's snapshot signing keys (kid, status, rotation dates), and where the reference lives. */
export function SigningKeysPage() {
  const keys = useQuery(KeysService.method.listKeys, {});
  return (
    <Page title="Signing keys">
      <p>
        Snapshots are signed with these Ed25519 keys. Verify with the key whose <code>kid</code> the signature
        names, and cache this list for at most four hours. See the{" "}
        <a href="/partner/v1/reference">API reference</a>.
      </p>
      {keys.isPending ? <Loading /> : null}
      <ErrorBox error={keys.error} />
      {keys.data ? (
        <TableWrap label="Signing keys">
          <table>
            <caption class="visually-hidden">Signing keys</caption>
            <thead>
              <tr>
                <th scope="col">kid</th>
                <th scope="col">Status</th>
                <th scope="col">Signs from</th>
                <th scope="col">Listed until</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.keys.map((k) => (
                <tr key={k.kid}>
                  <td>
                    <code>{k.kid}</code>
                  </td>
                  <td>{enumName(SigningKey_StatusSchema, k.status)}</td>
                  <td>
                    <Time at={k.notBefore} />
                  </td>
                  <td>
                    <Time at={k.notAfter} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </Page>
  );
}
