package reqdetect

// langZH is the cue table of Chinese (rule 9; languages.go reads it).
var langZH = &langTable{
	code: "zh", name: "Chinese", presented: "附件中 已附 附上的 附加的 附带的", attach: "附件",
	delivery: "附上 附在 附加 作为附件 作為附件 上传 上傳 导出 導出 汇出 匯出 输出 保存 存为 存成 儲存 另存 交付 提交 可下载 可下載", send: "发送 發送 发给 發給 分享 发布 發佈",
	output:    "写入 寫入 写到 寫到 存到 存入 整理成 整理为 整理為 生成 创建 創建 建立 制作 製作 编写 編寫 撰写 撰寫 写成 寫成 做成 写一份 寫一份 做一份 制成 製成",
	transform: "转换 轉換 转成 轉成 转为 轉為 翻译 翻譯", input: "阅读 閱讀 读 讀 看一下 查看 总结 總結 摘要 分析 比较 比較 审阅 審閱 检查 檢查 使用 运行 運行 执行 執行 跑",
	reply: "回复 回覆 回答 答复 答覆 说明 說明 告诉 告訴 解释 解釋", inline: "回复里 回复中 回覆中 这里 這裡 这儿 聊天 对话中 评论 評論 留言",
	negators: "别 別 无需 無需 不必 不需要 勿 无须 無須 不是 不會 不会 不需要", fileWords: "文件 檔案 档案",
	model: "模板 范本 範本 样例 樣例 参照 參照 按照 依照 仿照 根据 根據 基于 基於 像 参考 參考", modelAfter: "一样 一樣 相同 为模板 為模板 作为模板 作為模板 的格式",
	destPreps: "成 为 為", namingPreps: "成 为 為", sourcePreps: "从 從 根据 根據", sourceAfter: "中的 里的 裡的",
	productNouns: "选项 選項 功能 命令 工具 脚本 腳本 按钮 按鈕 程序 程式 服务 服務", featureVerbs: "追加 実装 添加 新增 实现 實現 实作 實作 支持 支援",
	howTo: "如何 怎么 怎麼 怎样 怎樣 方法", doneAfter: "了 过 過 済", doneBefore: "已经 已經 已",
	deliverables: "交付物 交付成果 成果 产出物 產出物 产出 產出 输出文件 輸出檔案", inputs: "资料 資料 参考资料 參考資料 输入 輸入 输入文件 上下文 附件 背景 参考 现状 現狀 输入数据 輸入資料 参考材料",
	edit: "修复 修復 修正 修改 更新 改成 改為 改为 调整 調整 编辑 編輯", naming: "命名 名为 名為 叫做 文件名 檔名", polite: "请 請 麻烦 麻煩",
	repo: "分支 合并请求 合併請求 拉取请求 仓库 倉庫 PR 测试 測試 单元测试 單元測試", bug: "需求 缺陷 错误 錯誤 修复 修復", pointers: "这个文件 這個檔案 该文件 該檔案 它",
	other: "其他 额外 額外 另外",
}
