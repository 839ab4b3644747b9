package reqdetect

// langJA is the cue table of Japanese (rule 9; languages.go reads it).
var langJA = &langTable{
	code: "ja", name: "Japanese", presented: "添付の 添付した 添付します 添付された 添付済",
	delivery: "アップロード エクスポート 書き出 ダウンロード可能 ダウンロードできる 添付 出力 保存 納品 提出", send: "送って 送付 送信 共有", output: "作って 作る 書いて まとめて 作成 生成",
	transform: "変換 翻訳", input: "読んで 読み 見て レビュー 使って 要約 確認 分析 比較 使用 実行", reply: "答えて 教えて 返信 回答 説明",
	inline: "ここ チャット 返信 コメント欄 インライン", negators: "しないで しない せず ないで 不要 不可 禁止 不用 無用 ません ではない", fileWords: "ファイル エクセル",
	model: "テンプレート ひな形 例の 参考に 雛形", modelAfter: "と同じ を参考 をもとに を元に に基づ のような みたいな をテンプレート を雛形", destPreps: "として に",
	namingPreps: "として", sourceAfter: "から より の内容", productNouns: "オプション コマンド ツール スクリプト ボタン アプリ プログラム 機能",
	howTo: "やり方 どうやって どうすれば", doneAfter: "した しました あります ありました", deliverables: "成果物 納品物 提出物 出力ファイル",
	inputs: "参考資料 インプット 背景 参考 入力 入力ファイル 添付ファイル 資料 前提 現状 入力データ", edit: "修正 更新 変更 編集 直して 改善", naming: "名前 ファイル名 命名",
	polite: "ください お願いします お願い", repo: "プルリクエスト ブランチ コミット リポジトリ テスト", bug: "バグ 不具合", pointers: "このファイル それ これ その",
	other: "他の 追加の 別の",
}
